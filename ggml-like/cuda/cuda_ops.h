// The ops the CUDA backend runs, from nodes: f32 activations; weights of every type in the
// matrix products and row gathers. One file per op family; cuda_backend.cpp dispatches.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "ggml-like/core/tensor.h"
#include "ggml-like/cuda/cuda_kernels.h"

namespace ggl::cuda {

// Whether node is one this backend has a kernel for (its op, types and layouts).
bool supports(const Tensor& node);
// Throws ggl::Error("cuda: <what>: <the runtime's text>") unless e is cudaSuccess.
void check(cudaError_t e, const char* what);
Shape shape_of(const Tensor& t);

// op_elementwise.cpp (kernels in op_elementwise.cu): rms_norm, add, mul, div, scale, silu,
// sigmoid, swiglu, softmax.
void run_elementwise(const Tensor& node, cudaStream_t stream);

// ---- matrix products and row gathers (op_matmul.*, op_get_rows.*) --------------------------
// Weights of every type block_decode.h decodes; f32 activations and results.
struct MatmulWork {
  cudaStream_t stream;
  cublasHandle_t cublas;
  void* data;  // the backend's work buffer, at least matmul_work_bytes(node) bytes
  size_t bytes;
};
// mul_mat, mul_mat_t, mul_mat_id: few columns read the blocks directly (mat-vec kernels), many go
// through cuBLAS on weights dequantized into the work buffer.
bool supports_matmul(const Tensor& node);
size_t matmul_work_bytes(const Tensor& node);
void run_matmul(const Tensor& node, const MatmulWork& work);
// get_rows: rows of a table of any weight type selected by ids, as f32.
bool supports_get_rows(const Tensor& node);
void run_get_rows(const Tensor& node, cudaStream_t stream);
// ---- end matrix products and row gathers ---------------------------------------------------

}  // namespace ggl::cuda
