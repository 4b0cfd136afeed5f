// One block of the absorbed MLA decode kernel (op_attention.cu), phase by phase, as GGL_HD
// functions of the thread index: the kernel runs each phase on its kThreads threads with a barrier
// between phases, and tests/ggml-like/cuda/test_cuda_host_math.cpp runs the same phases on the host in a loop
// over the thread index, so that the kernel's index arithmetic (shared-memory layout, thread
// roles, tile bounds, chunk ranges, the partial states and their merge) is checked without a GPU.
//
// A block takes kHeads query heads of one token and a chunk of the cache (split-K). Per tile of
// kTile cached rows: every thread decodes its share of the rows into shared memory (once for all
// heads), a thread per (head, key) scores, a thread per head updates that head's online softmax,
// and sixteen threads per head accumulate the weighted rows (V is each row's first Dv values).
#pragma once
#include <cstddef>
#include <cstdint>

#include "ggml-like/cuda/cuda_math.h"

namespace ggl::cuda::mla {

inline constexpr int kHeads = 16;                // query heads per block
inline constexpr int kTile = 16;                 // cached rows per shared-memory tile
inline constexpr int kThreads = kHeads * kTile;  // one per (head, key) when scoring
inline constexpr int64_t kMaxDk = 576;
inline constexpr int64_t kMaxDv = 512;
inline constexpr int kPerThread = static_cast<int>(kMaxDv / kTile);  // accumulators (16 threads a head)
inline constexpr int kMaxSplits = 256;
inline constexpr int64_t kMaxTokens = 8;
static_assert(kThreads == 256 && kMaxDv % kTile == 0, "thread roles");

// What the blocks read: the cache (rows k_row bytes apart, K the first Dk values, V the first Dv),
// the queries (f32, byte strides per head and token), and where partial states go.
struct Problem {
  const uint8_t* k;
  int64_t k_row;
  Elem kt;
  int64_t Dk, Dv, H, n_kv;
  const uint8_t* q;
  int64_t q_head, q_token;
  float scale;
};

// Shared memory, in floats: queries and the key tile with rows padded by one float (the threads of
// a warp, on different rows, then hit different banks), the tile's scores turned weights, and each
// head's accumulator factor. 74.75 KiB at Dk = 576.
struct Layout {
  int64_t stride, q, tile, weights, keep, total;
};
GGL_HD Layout layout(int64_t Dk) {
  Layout s;
  s.stride = Dk + 1;
  s.q = 0;
  s.tile = s.q + kHeads * s.stride;
  s.weights = s.tile + kTile * s.stride;
  s.keep = s.weights + kHeads * kTile;
  s.total = s.keep + kHeads;
  return s;
}

// A thread's registers across tiles: its head's softmax state (threads tid < kHeads) and its
// accumulators (head tid / kTile, values tid % kTile + kTile * v).
struct Registers {
  SoftmaxState softmax;
  float acc[kPerThread];
};
GGL_HD void start(Registers& r) {
  r.softmax = softmax_empty();
  GGL_UNROLL
  for (int v = 0; v < kPerThread; ++v) r.acc[v] = 0.0f;
}

// Keys [j0, j1) of chunk `split` for a token at position pos (empty past the visible keys).
GGL_HD void chunk(const Problem& p, int32_t pos, int split, int64_t per_split, int64_t* j0, int64_t* j1) {
  const int64_t visible = visible_keys(pos, p.n_kv);
  *j0 = static_cast<int64_t>(split) * per_split;
  *j1 = *j0 + per_split < visible ? *j0 + per_split : visible;
}

// Phase 0: the queries of heads h0.. of token t (zeros past H).
GGL_HD void load_queries(const Problem& p, int64_t t, int64_t h0, int tid, float* shared) {
  const Layout L = layout(p.Dk);
  for (int64_t x = tid; x < kHeads * p.Dk; x += kThreads) {
    const int64_t hh = x / p.Dk, i = x % p.Dk;
    shared[L.q + hh * L.stride + i] =
        h0 + hh < p.H ? reinterpret_cast<const float*>(p.q + (h0 + hh) * p.q_head + t * p.q_token)[i] : 0.0f;
  }
}

// Phase 1: rows jt .. jt + n - 1 decoded into the tile (zeros past n).
GGL_HD void load_tile(const Problem& p, int64_t jt, int n, int tid, float* shared) {
  const Layout L = layout(p.Dk);
  for (int64_t x = tid; x < kTile * p.Dk; x += kThreads) {
    const int64_t j = x / p.Dk, i = x % p.Dk;
    shared[L.tile + j * L.stride + i] = j < n ? load_element(p.kt, p.k + (jt + j) * p.k_row, i) : 0.0f;
  }
}

// Phase 2: the score of key tid % kTile for head tid / kTile.
GGL_HD void score(const Problem& p, int tid, float* shared) {
  const Layout L = layout(p.Dk);
  const int h = tid / kTile, j = tid % kTile;
  const float* qr = shared + L.q + h * L.stride;
  const float* kr = shared + L.tile + j * L.stride;
  float dot = 0.0f;
  for (int64_t i = 0; i < p.Dk; ++i) dot += qr[i] * kr[i];
  shared[L.weights + h * kTile + j] = dot * p.scale;
}

// Phase 3 (threads tid < kHeads): head tid's online softmax over the tile's n scores; weights
// past n are zero.
GGL_HD void update_softmax(const Problem& p, int tid, int n, Registers& r, float* shared) {
  const Layout L = layout(p.Dk);
  float* w = shared + L.weights + tid * kTile;
  shared[L.keep + tid] = softmax_tile(r.softmax, w, n);
  for (int j = n; j < kTile; ++j) w[j] = 0.0f;
}

// Phase 4: acc = acc * keep + sum_j weight_j * row_j for the thread's values.
GGL_HD void accumulate(const Problem& p, int tid, int n, Registers& r, const float* shared) {
  const Layout L = layout(p.Dk);
  const int h = tid / kTile, lane = tid % kTile;
  const float* w = shared + L.weights + h * kTile;
  const float c = shared[L.keep + h];
  GGL_UNROLL
  for (int v = 0; v < kPerThread; ++v) {
    const int64_t e = lane + static_cast<int64_t>(v) * kTile;
    if (e < p.Dv) {
      float sum = r.acc[v] * c;
      for (int j = 0; j < n; ++j) sum += w[j] * shared[L.tile + j * L.stride + e];
      r.acc[v] = sum;
    }
  }
}

// Floats of the work buffer: every (token, head, split)'s partial state.
GGL_HD size_t work_floats(int64_t H, int64_t T, int64_t Dv, int splits) {
  return static_cast<size_t>(T * H * splits * (Dv + 2));
}

// Partial state of (token t, head h, split s) in the work buffer: Dv accumulators, then m and l.
GGL_HD float* part(float* work, const Problem& p, int splits, int64_t t, int64_t h, int s) {
  return work + ((t * p.H + h) * splits + s) * (p.Dv + 2);
}

// Phase 5: the block's chunk state for its heads (those below H).
GGL_HD void write_part(const Problem& p, int64_t t, int64_t h0, int split, int splits, int tid, const Registers& r,
                       float* work) {
  const int h = tid / kTile, lane = tid % kTile;
  if (h0 + h < p.H) {
    float* out = part(work, p, splits, t, h0 + h, split);
    GGL_UNROLL
    for (int v = 0; v < kPerThread; ++v) {
      const int64_t e = lane + static_cast<int64_t>(v) * kTile;
      if (e < p.Dv) out[e] = r.acc[v];
    }
  }
  if (tid < kHeads && h0 + tid < p.H) {
    float* out = part(work, p, splits, t, h0 + tid, split);
    out[p.Dv] = r.softmax.m;
    out[p.Dv + 1] = r.softmax.l;
  }
}

// The merge, for (token t, head h): weight[s] of every chunk (threads share the loop), then
// 1 / l, then each output value.
GGL_HD SoftmaxState part_state(float* work, const Problem& p, int splits, int64_t t, int64_t h, int s) {
  const float* x = part(work, p, splits, t, h, s);
  return {x[p.Dv], x[p.Dv + 1]};
}
GGL_HD float merged_max(float* work, const Problem& p, int splits, int64_t t, int64_t h) {
  float m = -INFINITY;
  for (int s = 0; s < splits; ++s) m = merge_max(m, part_state(work, p, splits, t, h, s));
  return m;
}
GGL_HD float merged_inverse(float* work, const Problem& p, int splits, int64_t t, int64_t h, const float* weight) {
  float l = 0.0f;
  for (int s = 0; s < splits; ++s) l += weight[s] * part_state(work, p, splits, t, h, s).l;
  return softmax_inverse(l);
}
GGL_HD float merged_value(float* work, const Problem& p, int splits, int64_t t, int64_t h, const float* weight,
                          float inverse, int64_t e) {
  float sum = 0.0f;
  for (int s = 0; s < splits; ++s) sum += weight[s] * part(work, p, splits, t, h, s)[e];
  return sum * inverse;
}

}  // namespace ggl::cuda::mla
