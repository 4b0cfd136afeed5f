// Row-wise and element-wise f32 kernels (cuda_kernels.h says the conventions).
#include <algorithm>

#include "ggml-like/cuda/cuda_kernels.h"

namespace ggl::cuda {
namespace {

__device__ inline const float* row_ptr(const void* base, const Shape& s, int64_t row) {
  const int64_t i1 = row % s.ne[1], i2 = (row / s.ne[1]) % s.ne[2], i3 = row / (s.ne[1] * s.ne[2]);
  return reinterpret_cast<const float*>(static_cast<const char*>(base) + i1 * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3]);
}

// Every thread's value combined by op (a sum or a max) over the block; every thread gets it.
template <typename Op>
__device__ float block_reduce(float v, Op op) {
  __shared__ float partial[kBlock];
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] = op(partial[threadIdx.x], partial[threadIdx.x + stride]);
    __syncthreads();
  }
  const float total = partial[0];
  __syncthreads();
  return total;
}

__device__ float add(float a, float b) { return a + b; }
__device__ float larger(float a, float b) { return fmaxf(a, b); }

__global__ void rms_norm_rows(const void* a, Shape as, void* out, Shape os, float eps) {
  const float* x = row_ptr(a, as, blockIdx.x);
  float* y = const_cast<float*>(row_ptr(out, os, blockIdx.x));
  const int64_t n = as.ne[0];
  float squares = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) squares += x[i] * x[i];
  const float mean = block_reduce(squares, add) / static_cast<float>(n);
  const float scale = rsqrtf(mean + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) y[i] = x[i] * scale;
}

__global__ void softmax_rows(const void* a, Shape as, void* out, Shape os) {
  const float* x = row_ptr(a, as, blockIdx.x);
  float* y = const_cast<float*>(row_ptr(out, os, blockIdx.x));
  const int64_t n = as.ne[0];
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, x[i]);
  m = block_reduce(m, larger);
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += expf(x[i] - m);
  sum = block_reduce(sum, add);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) y[i] = expf(x[i] - m) / sum;
}

// out = f(a, b) element by element; b is broadcast (each of its dimensions divides a's).
__global__ void map_elements(MapFn fn, const void* a, Shape as, const void* b, Shape bs, void* out, Shape os, float s) {
  const int64_t n = os.ne[0] * os.ne[1] * os.ne[2] * os.ne[3];
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i0 = i % os.ne[0], row = i / os.ne[0];
    const float x = row_ptr(a, as, row)[i0];
    float y = 0.0f;
    if (b) {
      const int64_t r1 = row % os.ne[1], r2 = (row / os.ne[1]) % os.ne[2], r3 = row / (os.ne[1] * os.ne[2]);
      const int64_t brow = (r1 % bs.ne[1]) + bs.ne[1] * ((r2 % bs.ne[2]) + bs.ne[2] * (r3 % bs.ne[3]));
      y = row_ptr(b, bs, brow)[i0 % bs.ne[0]];
    }
    float r = 0.0f;
    switch (fn) {
      case MapFn::kAdd: r = x + y; break;
      case MapFn::kMul: r = x * y; break;
      case MapFn::kDiv: r = x / y; break;
      case MapFn::kScale: r = x * s; break;
      case MapFn::kSilu: r = x / (1.0f + expf(-x)); break;
      case MapFn::kSigmoid: r = 1.0f / (1.0f + expf(-x)); break;
      case MapFn::kSwiglu: r = x / (1.0f + expf(-x)) * y; break;
    }
    const_cast<float*>(row_ptr(out, os, row))[i0] = r;
  }
}

}  // namespace

cudaError_t launch_rms_norm(const void* a, Shape as, void* out, Shape os, float eps, cudaStream_t stream) {
  const int64_t rows = as.ne[1] * as.ne[2] * as.ne[3];
  rms_norm_rows<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(a, as, out, os, eps);
  return cudaGetLastError();
}

cudaError_t launch_softmax(const void* a, Shape as, void* out, Shape os, cudaStream_t stream) {
  const int64_t rows = as.ne[1] * as.ne[2] * as.ne[3];
  softmax_rows<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(a, as, out, os);
  return cudaGetLastError();
}

cudaError_t launch_map(MapFn fn, const void* a, Shape as, const void* b, Shape bs, void* out, Shape os, float s,
                       cudaStream_t stream) {
  const int64_t n = os.ne[0] * os.ne[1] * os.ne[2] * os.ne[3];
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>((n + kBlock - 1) / kBlock, 65535));
  map_elements<<<grid, kBlock, 0, stream>>>(fn, a, as, b, bs, out, os, s);
  return cudaGetLastError();
}

}  // namespace ggl::cuda
