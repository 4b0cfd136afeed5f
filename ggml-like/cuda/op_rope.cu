// Rotary position embedding with optional YaRN (cuda_math.h's rope_cos_sin, the CPU's formula).
// One block per (token, batch): its threads first work out the cos/sin of every pair for the
// token's position into shared memory (in double, as the CPU), then rotate every head's row.
#include <algorithm>

#include "ggml-like/cuda/cuda_op_kernels.h"

namespace ggl::cuda {
namespace {

// Rows are [D, H] per (t, b): blockIdx.x = t + T * b.
__global__ void rope_tokens(const void* a, Shape as, const int32_t* positions, const float* freq_factors, void* out,
                            Shape os, RopeArgs r) {
  extern __shared__ float cs[];  // cos, sin of pair i at 2i, 2i + 1
  const int64_t t = blockIdx.x % as.ne[2], b = blockIdx.x / as.ne[2];
  const int pairs = r.n_rot / 2;
  const int32_t pos = positions[t];
  for (int i = threadIdx.x; i < pairs; i += blockDim.x)
    rope_cos_sin(r, i, pos, freq_factors ? freq_factors[i] : 1.0f, &cs[2 * i], &cs[2 * i + 1]);
  __syncthreads();
  const int64_t D = as.ne[0], H = as.ne[1];
  const int64_t tail = D - r.n_rot;  // elements past the rotated ones are copied
  const int64_t per_row = pairs + tail;
  for (int64_t w = threadIdx.x; w < H * per_row; w += blockDim.x) {
    const int64_t h = w / per_row, i = w % per_row;
    const float* x =
        reinterpret_cast<const float*>(static_cast<const uint8_t*>(a) + h * as.nb[1] + t * as.nb[2] + b * as.nb[3]);
    float* y = reinterpret_cast<float*>(static_cast<uint8_t*>(out) + h * os.nb[1] + t * os.nb[2] + b * os.nb[3]);
    if (i >= pairs) {
      const int64_t e = r.n_rot + (i - pairs);
      y[e] = x[e];
      continue;
    }
    int i0, i1;
    rope_pair(r, static_cast<int>(i), &i0, &i1);
    const float c = cs[2 * i], s = cs[2 * i + 1];
    const float x0 = x[i0], x1 = x[i1];
    y[i0] = x0 * c - x1 * s;
    y[i1] = x0 * s + x1 * c;
  }
}

}  // namespace

cudaError_t launch_rope(const void* a, Shape as, const int32_t* positions, const float* freq_factors, void* out,
                        Shape os, const RopeArgs& r, cudaStream_t stream) {
  const int64_t blocks = as.ne[2] * as.ne[3];
  const size_t shared = static_cast<size_t>(r.n_rot) * sizeof(float);
  if (shared > 48 * 1024) return cudaErrorInvalidValue;  // n_rot of more than 12288: supports() declines
  rope_tokens<<<static_cast<unsigned>(blocks), 128, shared, stream>>>(a, as, positions, freq_factors, out, os, r);
  return cudaGetLastError();
}

}  // namespace ggl::cuda
