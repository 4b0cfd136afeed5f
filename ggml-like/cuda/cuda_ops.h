// The ops the CUDA backend runs, from nodes: f32 activations, mul_mat with f32 weights through
// cuBLAS. One file per op family; cuda_backend.cpp dispatches.
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
// op_matmul.cpp: mul_mat with f32 weights (cuBLAS).
void run_matmul(const Tensor& node, cudaStream_t stream, cublasHandle_t cublas);

// ---- rope, top-k, row movers, attention (kernels declared in cuda_op_kernels.h) -------------
// supports_<family>: whether the node is of the family and its types and layouts have a kernel.
// f32 with contiguous rows (null: no).
bool f32_rows(const Tensor* t);
// The kernels' element type of t, for f32, f16, bf16 and q8_0.
std::optional<Elem> elem_of(Type t);
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
