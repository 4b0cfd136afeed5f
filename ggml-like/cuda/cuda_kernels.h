// The kernels' side of the CUDA backend: plain pointers, shapes and launchers, no ggl::Tensor
// (whose headers use fmt's compile-time format checks, which nvcc's front end cannot evaluate).
// The .cpp files (cuda_ops.h) turn nodes into these calls. Each launcher returns the launch's error.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace ggl::cuda {

constexpr int kBlock = 256;

// A tensor's shape and byte strides, passed to kernels by value. Rows (dimension 0) are
// contiguous f32; rows are found through the strides, so views with gaps work.
struct Shape {
  int64_t ne[4];
  int64_t nb[4];
};

enum class MapFn { kAdd, kMul, kDiv, kScale, kSilu, kSigmoid, kSwiglu };

// One block per row of a.
cudaError_t launch_rms_norm(const void* a, Shape as, void* out, Shape os, float eps, cudaStream_t stream);
cudaError_t launch_softmax(const void* a, Shape as, void* out, Shape os, cudaStream_t stream);
// out = fn(a, b) element by element (b may be null for unary fns; broadcast: each of b's
// dimensions divides a's), s the scale of kScale.
cudaError_t launch_map(MapFn fn, const void* a, Shape as, const void* b, Shape bs, void* out, Shape os, float s,
                       cudaStream_t stream);

}  // namespace ggl::cuda
