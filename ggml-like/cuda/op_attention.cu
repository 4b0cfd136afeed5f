// Flash attention: causal, online softmax (cuda_math.h's softmax_tile / merge_weight, the CPU's
// arithmetic), K and V of any element type of the cache (load_element).
//
// General form: one warp per query row (head h at token t). Rows are numbered KV head first, then
// token, then head within the group, so the warps of a block share their KV head (and mostly
// their token): they walk the same keys and find them in cache. Each key's score is a warp
// reduction; every lane keeps Dv / 32 accumulators.
//
// Absorbed MLA decode: every query head reads the one latent cache, and V is the leading Dv
// values of each K row. A block takes kMlaHeads heads of one token and a chunk of the keys
// (split-K): it decodes a tile of kMlaTile rows into shared memory once for all its heads, scores
// them (a thread per (head, key)), updates each head's softmax state (a thread per head) and
// accumulates the weighted rows (sixteen threads per head, Dv / 16 values each). Each block
// leaves its chunk's state; a second kernel merges the chunks of each (token, head).
#include <algorithm>

#include "ggml-like/cuda/cuda_op_kernels.h"

namespace ggl::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 4;                    // general form: warps (query rows) per block
constexpr int kLaneValues = kAttnMaxDim / kWarp;    // accumulators per lane
constexpr int kMlaTile = 16;                        // keys per shared-memory tile
constexpr int kMlaThreads = kMlaHeads * kMlaTile;   // one per (head, key) when scoring
constexpr int kMlaPerThread = kMlaMaxDv / kMlaTile; // accumulators per thread (16 threads a head)
constexpr int kMlaMaxSplits = 256;
static_assert(kMlaThreads == 256 && kMlaMaxDv % kMlaTile == 0, "MLA decode thread layout");

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
  const float* qrow = reinterpret_cast<const float*>(static_cast<const uint8_t*>(a.q) + h * a.qs.nb[1] + t * a.qs.nb[2]);
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

// Shared memory of the MLA decode kernel, in floats: queries and the key tile with rows padded by
// one float (so that the threads of a warp, on different rows, hit different banks), the tile's
// scores and weights, and each head's accumulator factor.
struct MlaShared {
  int64_t stride, q, tile, weights, keep, total;
};
__host__ __device__ MlaShared mla_shared(int64_t Dk) {
  MlaShared s;
  s.stride = Dk + 1;
  s.q = 0;
  s.tile = s.q + kMlaHeads * s.stride;
  s.weights = s.tile + kMlaTile * s.stride;
  s.keep = s.weights + kMlaHeads * kMlaTile;
  s.total = s.keep + kMlaHeads;
  return s;
}

// Partial state of (token t, head h, split s): Dv accumulators, then m and l.
__device__ float* mla_part(float* work, int64_t H, int64_t Dv, int splits, int64_t t, int64_t h, int s) {
  return work + ((t * H + h) * splits + s) * (Dv + 2);
}

// grid (splits, T, head groups of kMlaHeads), kMlaThreads threads.
__global__ void mla_decode_chunks(AttentionArgs a, float* work, int64_t per_split) {
  extern __shared__ float shared[];
  const int64_t Dk = a.qs.ne[0], H = a.qs.ne[1], Nkv = a.ks.ne[2], Dv = a.vs.ne[0];
  const int split = blockIdx.x, splits = gridDim.x;
  const int64_t t = blockIdx.y, h0 = static_cast<int64_t>(blockIdx.z) * kMlaHeads;
  const MlaShared L = mla_shared(Dk);
  float* q = shared + L.q;
  float* tile = shared + L.tile;
  float* weights = shared + L.weights;
  float* keep = shared + L.keep;
  const int tid = threadIdx.x;

  for (int64_t x = tid; x < kMlaHeads * Dk; x += kMlaThreads) {
    const int64_t hh = x / Dk, i = x % Dk;
    q[hh * L.stride + i] = h0 + hh < H ? reinterpret_cast<const float*>(static_cast<const uint8_t*>(a.q) +
                                                                         (h0 + hh) * a.qs.nb[1] + t * a.qs.nb[2])[i]
                                       : 0.0f;
  }
  const int64_t visible = visible_keys(a.positions[t], Nkv);
  const int64_t j0 = static_cast<int64_t>(split) * per_split;
  const int64_t j1 = j0 + per_split < visible ? j0 + per_split : visible;

  // Roles: scoring (head tid / kMlaTile, key tid % kMlaTile), softmax (head tid), accumulating
  // (head tid / 16, values tid % 16 + 16 v).
  const int score_head = tid / kMlaTile, score_key = tid % kMlaTile;
  const int acc_head = tid / kMlaTile, acc_lane = tid % kMlaTile;
  SoftmaxState state = softmax_empty();  // meaningful in threads tid < kMlaHeads
  float acc[kMlaPerThread];
#pragma unroll
  for (int v = 0; v < kMlaPerThread; ++v) acc[v] = 0.0f;

  for (int64_t jt = j0; jt < j1; jt += kMlaTile) {
    const int n = static_cast<int>(j1 - jt < kMlaTile ? j1 - jt : kMlaTile);
    __syncthreads();  // the previous tile's readers are done (and, first time, q is written)
    for (int64_t x = tid; x < kMlaTile * Dk; x += kMlaThreads) {
      const int64_t j = x / Dk, i = x % Dk;
      tile[j * L.stride + i] = j < n ? load_element(a.kt, kv_row(a.k, a.ks, 0, jt + j), i) : 0.0f;
    }
    __syncthreads();
    {
      const float* qr = q + score_head * L.stride;
      const float* kr = tile + score_key * L.stride;
      float dot = 0.0f;
      for (int64_t i = 0; i < Dk; ++i) dot += qr[i] * kr[i];
      weights[score_head * kMlaTile + score_key] = dot * a.scale;
    }
    __syncthreads();
    if (tid < kMlaHeads) {
      float* w = weights + tid * kMlaTile;
      keep[tid] = softmax_tile(state, w, n);
      for (int j = n; j < kMlaTile; ++j) w[j] = 0.0f;
    }
    __syncthreads();
    const float* w = weights + acc_head * kMlaTile;
    const float c = keep[acc_head];
#pragma unroll
    for (int v = 0; v < kMlaPerThread; ++v) {
      const int64_t e = acc_lane + static_cast<int64_t>(v) * kMlaTile;
      if (e < Dv) {
        float sum = acc[v] * c;
        for (int j = 0; j < n; ++j) sum += w[j] * tile[j * L.stride + e];
        acc[v] = sum;
      }
    }
  }
  if (h0 + acc_head < H) {
    float* part = mla_part(work, H, Dv, splits, t, h0 + acc_head, split);
#pragma unroll
    for (int v = 0; v < kMlaPerThread; ++v) {
      const int64_t e = acc_lane + static_cast<int64_t>(v) * kMlaTile;
      if (e < Dv) part[e] = acc[v];
    }
  }
  if (tid < kMlaHeads && h0 + tid < H) {
    float* part = mla_part(work, H, Dv, splits, t, h0 + tid, split);
    part[Dv] = state.m;
    part[Dv + 1] = state.l;
  }
}

// grid (H, T): merges the splits' states of one (token, head) into its output row.
__global__ void mla_merge(AttentionArgs a, const float* work, int splits) {
  __shared__ float weight[kMlaMaxSplits];
  const int64_t H = a.qs.ne[1], Dv = a.vs.ne[0], h = blockIdx.x, t = blockIdx.y;
  const float* parts = mla_part(const_cast<float*>(work), H, Dv, splits, t, h, 0);
  const auto state_of = [&](int s) {
    const float* p = parts + s * (Dv + 2);
    return SoftmaxState{p[Dv], p[Dv + 1]};
  };
  float m = -INFINITY;
  for (int s = 0; s < splits; ++s) m = merge_max(m, state_of(s));
  for (int s = threadIdx.x; s < splits; s += blockDim.x) weight[s] = merge_weight(state_of(s), m);
  __syncthreads();
  float l = 0.0f;
  for (int s = 0; s < splits; ++s) l += weight[s] * state_of(s).l;
  const float inverse = softmax_inverse(l);
  float* y = reinterpret_cast<float*>(static_cast<uint8_t*>(a.out) + h * a.os.nb[1] + t * a.os.nb[2]);
  for (int64_t e = threadIdx.x; e < Dv; e += blockDim.x) {
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s) sum += weight[s] * parts[s * (Dv + 2) + e];
    y[e] = sum * inverse;
  }
}

}  // namespace

cudaError_t launch_flash_attn(const AttentionArgs& a, cudaStream_t stream) {
  if (a.qs.ne[0] > kAttnMaxDim || a.vs.ne[0] > kAttnMaxDim) return cudaErrorInvalidValue;  // supports() declines
  const int64_t rows = a.qs.ne[1] * a.qs.ne[2];
  const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  attend_rows<<<blocks, kRowsPerBlock * kWarp, 0, stream>>>(a);
  return cudaGetLastError();
}

size_t mla_work_floats(int64_t H, int64_t T, int64_t Dv, int splits) {
  return static_cast<size_t>(T * H * splits * (Dv + 2));
}

cudaError_t launch_mla_decode(const AttentionArgs& a, float* work, int splits, cudaStream_t stream) {
  const int64_t Dk = a.qs.ne[0], H = a.qs.ne[1], T = a.qs.ne[2], Dv = a.vs.ne[0], Nkv = a.ks.ne[2];
  if (Dk > kMlaMaxDk || Dv > kMlaMaxDv || T > kMlaMaxTokens || splits < 1 || splits > kMlaMaxSplits)
    return cudaErrorInvalidValue;  // supports() and the split choice keep within these
  const size_t shared = static_cast<size_t>(mla_shared(Dk).total) * sizeof(float);  // 74.75 KiB at Dk 576
  // Past the 48 KiB a kernel gets by default: opt in (sm_80: up to 163 KiB, sm_89: 99, sm_90: 227).
  if (const cudaError_t e = cudaFuncSetAttribute(mla_decode_chunks, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(shared));
      e != cudaSuccess)
    return e;
  const int64_t per_split = split_keys(Nkv, splits, kMlaTile);
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(T),
                  static_cast<unsigned>((H + kMlaHeads - 1) / kMlaHeads));
  mla_decode_chunks<<<grid, kMlaThreads, shared, stream>>>(a, work, per_split);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  mla_merge<<<dim3(static_cast<unsigned>(H), static_cast<unsigned>(T)), 128, 0, stream>>>(a, work, splits);
  return cudaGetLastError();
}

}  // namespace ggl::cuda
