// The ops the CUDA backend runs, from nodes: f32 activations; weights of every type in the
// matrix products and row gathers. One file per op family; cuda_backend.cpp dispatches.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <optional>

#include "ggml-like/core/tensor.h"
#include "ggml-like/cuda/cuda_kernels.h"
#include "ggml-like/cuda/cuda_op_kernels.h"

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

// ---- rope, top-k, row movers, attention (kernels declared in cuda_op_kernels.h) -------------
// supports_<family>: whether the node is of the family and its types and layouts have a kernel.
// The kernels' element type of t, for f32, f16, bf16 and q8_0.
std::optional<Elem> elem_of(Type t);
// Rows the kernels read and write element by element: one of those types, contiguous rows, and
// strides and view offset that keep every element aligned to its loads (null: no).
bool readable_rows(const Tensor* t);
// The same, f32.
bool float_rows(const Tensor* t);
// op_rope.cpp
bool supports_rope(const Tensor& node);
void run_rope(const Tensor& node, cudaStream_t stream);
// op_topk.cpp
bool supports_top_k(const Tensor& node);
void run_top_k(const Tensor& node, cudaStream_t stream);
// op_rows.cpp: concat, cont, copy, sum_rows.
bool supports_rows(const Tensor& node);
void run_rows(const Tensor& node, cudaStream_t stream);
// op_attention.cpp: flash_attn; the MLA decode kernel needs attention_work_bytes(node) of device
// memory at work.
bool supports_attention(const Tensor& node);
size_t attention_work_bytes(const Tensor& node);
void run_attention(const Tensor& node, cudaStream_t stream, void* work);
// Runs node if it is one of the above families (true), else leaves it (false).
bool run_graph_op(const Tensor& node, cudaStream_t stream, void* work);

}  // namespace ggl::cuda
