// Row movers: concat, cont (any element type and strides to packed f32), copy (f32 into a
// destination's element type, e.g. a latent cache) and sum_rows. One thread per element, except
// q8_0 copies (a warp per 32-value block: its scale needs the block's largest magnitude) and
// sum_rows (a warp per row).
#include <algorithm>

#include "ggml-like/cuda/cuda_op_kernels.h"

namespace ggl::cuda {
namespace {

constexpr int kWarp = 32;

unsigned grid_for(int64_t threads) {
  return static_cast<unsigned>(std::clamp<int64_t>((threads + kBlock - 1) / kBlock, 1, 65535));
}

__global__ void concat_elements(const void* a, Shape as, const void* b, Shape bs, void* out, Shape os, int dim) {
  const int64_t n = os.ne[0] * os.ne[1] * os.ne[2] * os.ne[3];
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t ix[4] = {i % os.ne[0], (i / os.ne[0]) % os.ne[1], (i / (os.ne[0] * os.ne[1])) % os.ne[2],
                     i / (os.ne[0] * os.ne[1] * os.ne[2])};
    float* y = reinterpret_cast<float*>(static_cast<uint8_t*>(out) + ix[0] * os.nb[0] + ix[1] * os.nb[1] +
                                        ix[2] * os.nb[2] + ix[3] * os.nb[3]);
    // The part the element comes from, and its index there (broadcast: % of a size-1 dimension).
    const bool from_a = ix[dim] < as.ne[dim];
    const Shape& s = from_a ? as : bs;
    if (!from_a) ix[dim] -= as.ne[dim];
    const uint8_t* src = static_cast<const uint8_t*>(from_a ? a : b);
    for (int d = 0; d < 4; ++d) src += (ix[d] % s.ne[d]) * s.nb[d];
    *y = *reinterpret_cast<const float*>(src);
  }
}

__global__ void cont_elements(Elem t, const void* a, Shape as, void* out, Shape os) {
  const int64_t n = os.ne[0] * os.ne[1] * os.ne[2] * os.ne[3];
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i0 = i % os.ne[0], row = i / os.ne[0];
    reinterpret_cast<float*>(row_at(out, os, row))[i0] = load_element(t, row_at(a, as, row), i0);
  }
}

// f32, f16, bf16 destinations: one thread per element.
__global__ void copy_elements(const void* src, Shape ss, Elem t, void* dst, Shape ds) {
  const int64_t n = ds.ne[0] * ds.ne[1] * ds.ne[2] * ds.ne[3];
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i0 = i % ds.ne[0], row = i / ds.ne[0];
    const float x = reinterpret_cast<const float*>(row_at(src, ss, row))[i0];
    uint8_t* y = row_at(dst, ds, row);
    if (t == Elem::kF32)
      reinterpret_cast<float*>(y)[i0] = x;
    else if (t == Elem::kF16)
      reinterpret_cast<uint16_t*>(y)[i0] = float_to_half(x);
    else
      reinterpret_cast<uint16_t*>(y)[i0] = float_to_bf16(x);
  }
}

// q8_0 destinations: warp w of the grid quantizes block (w % blocks_per_row) of row (w / blocks_per_row).
__global__ void copy_q8_0_blocks(const void* src, Shape ss, void* dst, Shape ds) {
  const int64_t per_row = ds.ne[0] / kQ8Block;
  const int64_t blocks = per_row * rows_of(ds);
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t w = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / kWarp; w < blocks; w += warps) {
    const int64_t row = w / per_row, b = w % per_row;
    const float x = reinterpret_cast<const float*>(row_at(src, ss, row))[b * kQ8Block + lane];
    float amax = fabsf(x);
    for (int o = kWarp / 2; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float scale = q8_0_scale(amax);
    uint8_t* block = row_at(dst, ds, row) + b * kQ8BlockBytes;
    if (lane == 0) {
      const uint16_t h = float_to_half(scale);
      block[0] = static_cast<uint8_t>(h & 0xff);
      block[1] = static_cast<uint8_t>(h >> 8);
    }
    block[2 + lane] = static_cast<uint8_t>(q8_0_quant(x, scale));
  }
}

// One warp per row; the CPU sums in double, so does this (per lane, then across lanes).
__global__ void sum_rows_warps(const void* a, Shape as, void* out, Shape os) {
  const int64_t rows = rows_of(as);
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t r = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / kWarp; r < rows; r += warps) {
    const float* x = reinterpret_cast<const float*>(row_at(a, as, r));
    double sum = 0.0;
    for (int64_t i = lane; i < as.ne[0]; i += kWarp) sum += x[i];
    for (int o = kWarp / 2; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) reinterpret_cast<float*>(row_at(out, os, r))[0] = static_cast<float>(sum);
  }
}

int64_t elements(const Shape& s) { return s.ne[0] * s.ne[1] * s.ne[2] * s.ne[3]; }

}  // namespace

cudaError_t launch_concat(const void* a, Shape as, const void* b, Shape bs, void* out, Shape os, int dim,
                          cudaStream_t stream) {
  concat_elements<<<grid_for(elements(os)), kBlock, 0, stream>>>(a, as, b, bs, out, os, dim);
  return cudaGetLastError();
}

cudaError_t launch_cont(Elem t, const void* a, Shape as, void* out, Shape os, cudaStream_t stream) {
  cont_elements<<<grid_for(elements(os)), kBlock, 0, stream>>>(t, a, as, out, os);
  return cudaGetLastError();
}

cudaError_t launch_copy(const void* src, Shape ss, Elem t, void* dst, Shape ds, cudaStream_t stream) {
  if (t == Elem::kQ8_0) {
    copy_q8_0_blocks<<<grid_for(elements(ds)), kBlock, 0, stream>>>(src, ss, dst, ds);
  } else {
    copy_elements<<<grid_for(elements(ds)), kBlock, 0, stream>>>(src, ss, t, dst, ds);
  }
  return cudaGetLastError();
}

cudaError_t launch_sum_rows(const void* a, Shape as, void* out, Shape os, cudaStream_t stream) {
  sum_rows_warps<<<grid_for(rows_of(as) * kWarp), kBlock, 0, stream>>>(a, as, out, os);
  return cudaGetLastError();
}

}  // namespace ggl::cuda
