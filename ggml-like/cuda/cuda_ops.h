// The ops the CUDA backend runs, from nodes: f32 activations, mul_mat with f32 weights through
// cuBLAS. One file per op family; cuda_backend.cpp dispatches.
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
// op_matmul.cpp: mul_mat with f32 weights (cuBLAS).
void run_matmul(const Tensor& node, cudaStream_t stream, cublasHandle_t cublas);

}  // namespace ggl::cuda
