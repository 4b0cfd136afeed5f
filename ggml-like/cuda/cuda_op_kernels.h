// Launchers of the graph ops beyond the element-wise family and the matrix products: rope, top-k,
// the row movers (concat, cont, copy, sum_rows) and flash attention. Plain pointers and shapes as
// in cuda_kernels.h, element types as cuda_math.h's Elem; every launcher returns the launch's
// error. The per-thread arithmetic lives in cuda_math.h, shared with the host tests.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ggml-like/cuda/cuda_kernels.h"
#include "ggml-like/cuda/cuda_math.h"

namespace ggl::cuda {

#if defined(__CUDACC__)
// Start of row `row` (rows counted over dimensions 1..3) of a tensor with shape and strides s.
__device__ inline uint8_t* row_at(const void* base, const Shape& s, int64_t row) {
  const int64_t i1 = row % s.ne[1], i2 = (row / s.ne[1]) % s.ne[2], i3 = row / (s.ne[1] * s.ne[2]);
  return static_cast<uint8_t*>(const_cast<void*>(base)) + i1 * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3];
}
GGL_HD int64_t rows_of(const Shape& s) { return s.ne[1] * s.ne[2] * s.ne[3]; }
#endif

// op_rope.cu: a f32 [D, H, T, B] rows (any strides), one position per token; freq_factors null or
// n_rot / 2 divisors.
cudaError_t launch_rope(const void* a, Shape as, const int32_t* positions, const float* freq_factors, void* out,
                        Shape os, const RopeArgs& r, cudaStream_t stream);

// op_topk.cu: i32 indices of the k largest values of each f32 row (group-limited when
// n_groups > 1). Rows of at most kTopKMaxValues values.
inline constexpr int64_t kTopKMaxValues = 8192;
cudaError_t launch_top_k(const void* a, Shape as, void* out, Shape os, int k, int n_groups, int n_groups_used,
                         cudaStream_t stream);

// op_rows.cu. concat: f32 a and b joined along dim (other dimensions equal or broadcast from 1).
cudaError_t launch_concat(const void* a, Shape as, const void* b, Shape bs, void* out, Shape os, int dim,
                          cudaStream_t stream);
// cont: any-strided rows of type t (as: strides in bytes) to f32 out.
cudaError_t launch_cont(Elem t, const void* a, Shape as, void* out, Shape os, cudaStream_t stream);
// copy: f32 src into dst of type t (same shape; q8_0 rows whole blocks).
cudaError_t launch_copy(const void* src, Shape ss, Elem t, void* dst, Shape ds, cudaStream_t stream);
// sum_rows: out[0] of each row = the sum of a's row.
cudaError_t launch_sum_rows(const void* a, Shape as, void* out, Shape os, cudaStream_t stream);

// op_attention.cu. q f32 [Dk, H, T]; k [Dk, Hkv, Nkv] and v [Dv, Hkv, Nkv] of types kt, vt (rows
// contiguous, any strides); key j visible to token t when j <= positions[t]; out f32 [Dv, H, T].
struct AttentionArgs {
  const void* q;
  Shape qs;
  const void* k;
  Shape ks;
  Elem kt;
  const void* v;
  Shape vs;
  Elem vt;
  const int32_t* positions;
  void* out;
  Shape os;
  float scale;
};

// General form (prefill, GQA/MQA/MHA): one warp per query row. Dk, Dv <= kAttnMaxDim.
inline constexpr int64_t kAttnMaxDim = 1024;
cudaError_t launch_flash_attn(const AttentionArgs& a, cudaStream_t stream);

// Absorbed MLA decode: one KV head for every query head, V the leading Dv values of each K row
// (the same bytes), up to mla::kMaxTokens tokens, Dk <= 576, Dv <= 512 (mla_decode_block.h). Each
// block reads a chunk of the cache once for 16 heads of one token; `splits` chunks per token are
// merged by a second kernel from `work` (mla::work_floats(...) floats of device memory).
cudaError_t launch_mla_decode(const AttentionArgs& a, float* work, int splits, cudaStream_t stream);

}  // namespace ggl::cuda
