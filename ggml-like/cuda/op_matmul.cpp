// mul_mat with f32 weights through cuBLAS: out [N, M] = w [K, N] (N rows of K) times x [K, M].
// In cuBLAS's column-major terms w is a K x N matrix and x a K x M one, so out = w^T x.
#include <cublas_v2.h>

#include "ggml-like/core/error.h"
#include "ggml-like/cuda/cuda_ops.h"

namespace ggl::cuda {

void run_matmul(const Tensor& node, cudaStream_t stream, cublasHandle_t cublas) {
  const Tensor& w = *node.src[0];
  const Tensor& x = *node.src[1];
  const int k = static_cast<int>(w.ne[0]), n = static_cast<int>(w.ne[1]), m = static_cast<int>(x.ne[1]);
  const float one = 1.0f, zero = 0.0f;
  if (cublasSetStream(cublas, stream) != CUBLAS_STATUS_SUCCESS) fail("cuda: cublasSetStream failed");
  const cublasStatus_t s =
      cublasSgemm(cublas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, static_cast<const float*>(w.data),
                  static_cast<int>(w.nb[1] / sizeof(float)), static_cast<const float*>(x.data),
                  static_cast<int>(x.nb[1] / sizeof(float)), &zero, static_cast<float*>(node.data), n);
  if (s != CUBLAS_STATUS_SUCCESS) fail("cuda: cublasSgemm failed ({})", static_cast<int>(s));
}

}  // namespace ggl::cuda
