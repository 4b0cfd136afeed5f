// Flash attention: causal, online softmax (cuda_math.h's softmax_tile / merge_weight, the CPU's
// arithmetic), K and V of any element type of the cache (load_element).
//
// General form: one warp per query row (head h at token t). Rows are numbered KV head first, then
// token, then head within the group, so the warps of a block share their KV head (and mostly
// their token): they walk the same keys and find them in cache. Each key's score is a warp
// reduction; every lane keeps Dv / 32 accumulators.
//
// Absorbed MLA decode: every query head reads the one latent cache, and V is the leading Dv
// values of each K row. A block takes 16 heads of one token and a chunk of the keys (split-K),
// decoding each tile of cached rows into shared memory once for all its heads; its phases are
// mla_decode_block.h's, which the host tests also run. Each block leaves its chunk's state; a
// second kernel merges the chunks of each (token, head).
#include <algorithm>

#include "ggml-like/cuda/cuda_op_kernels.h"
#include "ggml-like/cuda/mla_decode_block.h"

namespace ggl::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 4;                  // general form: warps (query rows) per block
constexpr int kLaneValues = kAttnMaxDim / kWarp;  // accumulators per lane

__device__ float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;  // the butterfly leaves every lane the same sum
}

__device__ const uint8_t* kv_row(const void* base, const Shape& s, int64_t hkv, int64_t j) {
  return static_cast<const uint8_t*>(base) + hkv * s.nb[1] + j * s.nb[2];
}

__global__ void attend_rows(AttentionArgs a) {
  __shared__ float q_shared[kRowsPerBlock][kAttnMaxDim];
  const int64_t Dk = a.qs.ne[0], H = a.qs.ne[1], T = a.qs.ne[2], Hkv = a.ks.ne[1], Nkv = a.ks.ne[2];
  const int64_t G = H / Hkv, Dv = a.vs.ne[0];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + warp;
  if (r >= H * T) return;  // whole warps only: no block-wide barrier follows
  const int64_t g = r % G, t = (r / G) % T, hkv = r / (G * T), h = hkv * G + g;

  float* q = q_shared[warp];
  const float* qrow =
      reinterpret_cast<const float*>(static_cast<const uint8_t*>(a.q) + h * a.qs.nb[1] + t * a.qs.nb[2]);
  for (int64_t i = lane; i < Dk; i += kWarp) q[i] = qrow[i];
  __syncwarp();

  float acc[kLaneValues];
#pragma unroll
  for (int v = 0; v < kLaneValues; ++v) acc[v] = 0.0f;
  SoftmaxState state = softmax_empty();
  const int64_t visible = visible_keys(a.positions[t], Nkv);
  for (int64_t j = 0; j < visible; ++j) {
    const uint8_t* krow = kv_row(a.k, a.ks, hkv, j);
    float part = 0.0f;
    for (int64_t i = lane; i < Dk; i += kWarp) part += q[i] * load_element(a.kt, krow, i);
    float p = warp_sum(part) * a.scale;
    const float keep = softmax_tile(state, &p, 1);
    const uint8_t* vrow = kv_row(a.v, a.vs, hkv, j);
#pragma unroll
    for (int v = 0; v < kLaneValues; ++v) {
      const int64_t e = lane + static_cast<int64_t>(v) * kWarp;
      if (e < Dv) acc[v] = acc[v] * keep + p * load_element(a.vt, vrow, e);
    }
  }
  const float inverse = softmax_inverse(state.l);
  float* y = reinterpret_cast<float*>(static_cast<uint8_t*>(a.out) + h * a.os.nb[1] + t * a.os.nb[2]);
#pragma unroll
  for (int v = 0; v < kLaneValues; ++v) {
    const int64_t e = lane + static_cast<int64_t>(v) * kWarp;
    if (e < Dv) y[e] = acc[v] * inverse;
  }
}

// grid (splits, T, head groups of mla::kHeads), mla::kThreads threads: mla_decode_block.h's phases.
__global__ void mla_decode_chunks(mla::Problem p, const int32_t* positions, float* work, int64_t per_split) {
  extern __shared__ float shared[];
  const int split = blockIdx.x, splits = gridDim.x, tid = threadIdx.x;
  const int64_t t = blockIdx.y, h0 = static_cast<int64_t>(blockIdx.z) * mla::kHeads;
  mla::Registers r;
  mla::start(r);
  mla::load_queries(p, t, h0, tid, shared);
  int64_t j0, j1;
  mla::chunk(p, positions[t], split, per_split, &j0, &j1);
  for (int64_t jt = j0; jt < j1; jt += mla::kTile) {  // the same trip count in every thread
    const int n = static_cast<int>(j1 - jt < mla::kTile ? j1 - jt : mla::kTile);
    __syncthreads();  // the previous tile's readers are done (the first time: the queries are in)
    mla::load_tile(p, jt, n, tid, shared);
    __syncthreads();
    mla::score(p, tid, shared);
    __syncthreads();
    if (tid < mla::kHeads) mla::update_softmax(p, tid, n, r, shared);
    __syncthreads();
    mla::accumulate(p, tid, n, r, shared);
  }
  mla::write_part(p, t, h0, split, splits, tid, r, work);
}

// grid (H, T): merges the chunks' states of one (token, head) into its output row.
__global__ void mla_merge(mla::Problem p, float* work, int splits, void* out, Shape os) {
  __shared__ float weight[mla::kMaxSplits];
  const int64_t h = blockIdx.x, t = blockIdx.y;
  const float m = mla::merged_max(work, p, splits, t, h);
  for (int s = threadIdx.x; s < splits; s += blockDim.x)
    weight[s] = merge_weight(mla::part_state(work, p, splits, t, h, s), m);
  __syncthreads();
  const float inverse = mla::merged_inverse(work, p, splits, t, h, weight);
  float* y = reinterpret_cast<float*>(static_cast<uint8_t*>(out) + h * os.nb[1] + t * os.nb[2]);
  for (int64_t e = threadIdx.x; e < p.Dv; e += blockDim.x)
    y[e] = mla::merged_value(work, p, splits, t, h, weight, inverse, e);
}

}  // namespace

cudaError_t launch_flash_attn(const AttentionArgs& a, cudaStream_t stream) {
  if (a.qs.ne[0] > kAttnMaxDim || a.vs.ne[0] > kAttnMaxDim) return cudaErrorInvalidValue;  // supports() declines
  const int64_t rows = a.qs.ne[1] * a.qs.ne[2];
  const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  attend_rows<<<blocks, kRowsPerBlock * kWarp, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t launch_mla_decode(const AttentionArgs& a, float* work, int splits, cudaStream_t stream) {
  const int64_t Dk = a.qs.ne[0], H = a.qs.ne[1], T = a.qs.ne[2], Dv = a.vs.ne[0], Nkv = a.ks.ne[2];
  if (Dk > mla::kMaxDk || Dv > mla::kMaxDv || Dv > Dk || T > mla::kMaxTokens || splits < 1 || splits > mla::kMaxSplits)
    return cudaErrorInvalidValue;  // supports() and the split choice keep within these
  const mla::Problem p{static_cast<const uint8_t*>(a.k), a.ks.nb[2], a.kt,       Dk,     Dv, H, Nkv,
                       static_cast<const uint8_t*>(a.q), a.qs.nb[1], a.qs.nb[2], a.scale};
  const size_t shared = static_cast<size_t>(mla::layout(Dk).total) * sizeof(float);  // 74.75 KiB at Dk 576
  // Past the 48 KiB a kernel gets by default: opt in (sm_80: up to 163 KiB, sm_89: 99, sm_90: 227).
  if (const cudaError_t e = cudaFuncSetAttribute(mla_decode_chunks, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(shared));
      e != cudaSuccess)
    return e;
  const int64_t per_split = split_keys(Nkv, splits, mla::kTile);
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(T),
                  static_cast<unsigned>((H + mla::kHeads - 1) / mla::kHeads));
  mla_decode_chunks<<<grid, mla::kThreads, shared, stream>>>(p, a.positions, work, per_split);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  mla_merge<<<dim3(static_cast<unsigned>(H), static_cast<unsigned>(T)), 128, 0, stream>>>(p, work, splits, a.out, a.os);
  return cudaGetLastError();
}

}  // namespace ggl::cuda
