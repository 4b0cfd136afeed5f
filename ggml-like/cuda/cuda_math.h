// The per-thread arithmetic of the CUDA kernels, written once for the device and the host: element
// decode and encode (f16, bf16, q8_0), the rotary angle with the YaRN ramp, the online-softmax
// steps and the merge of partial states, and the top-k ordering. Under nvcc the functions are
// __host__ __device__; for the ordinary C++ compiler GGL_HD is empty and this header needs no
// CUDA header, so the default build's tests (tests/ggml-like/cuda/test_cuda_host_math.cpp) check this code
// against the CPU backend's ops on a machine without a GPU. Each function mirrors the CPU op it
// names; where the CPU's result is exact (conversions, q8_0 bytes, top-k indices) so is this.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ggml-like/core/half_bits.h"   // GGL_HD, half_to_float, float_to_half, bf16_to_float, float_to_bf16
#include "ggml-like/core/rope_math.h"   // RopeArgs, rope_ramp, rope_cos_sin, rope_pair
#include "ggml-like/core/top_k_rule.h"  // topk_before, topk_group_score

namespace ggl::cuda {

// Element types the row movers and attention read and write (ggl::Type's subset, by name: the
// kernels cannot include ggl's type headers' dependents).
enum class Elem : int32_t { kF32, kF16, kBF16, kQ8_0 };

inline constexpr int kQ8Block = 32;       // values per q8_0 block
inline constexpr int kQ8BlockBytes = 34;  // fp16 scale, then 32 int8

// ---- element decode and encode (bit-exact with core/fp16.h and quant/legacy.h) -------------------
// f16 and bf16 scalars: core/half_bits.h (ggl::half_to_float, float_to_half, bf16_to_float,
// float_to_bf16), the CPU's own conversions.

// Two bytes little-endian, with no alignment assumed (a q8_0 block is 34 bytes).
GGL_HD uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

// Element i of a row of type t.
GGL_HD float load_element(Elem t, const uint8_t* row, int64_t i) {
  switch (t) {
    case Elem::kF32: return reinterpret_cast<const float*>(row)[i];
    case Elem::kF16: return half_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
    case Elem::kBF16: return bf16_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
    case Elem::kQ8_0: {
      const uint8_t* block = row + (i / kQ8Block) * kQ8BlockBytes;
      return half_to_float(load_u16(block)) * static_cast<float>(static_cast<int8_t>(block[2 + i % kQ8Block]));
    }
  }
  return 0.0f;
}

// q8_0 of one block: the scale from the block's largest magnitude, then each value's quant.
GGL_HD float q8_0_scale(float amax) { return amax / 127.0f; }
GGL_HD int8_t q8_0_quant(float x, float scale) {
  const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  const float r = roundf(x * inverse);  // halfway cases away from zero, as the CPU's std::round
  return static_cast<int8_t>(r >= 127.0f ? 127 : r <= -128.0f ? -128 : static_cast<int>(r));
}

// ---- rotary embedding: core/rope_math.h (RopeArgs, rope_cos_sin, rope_pair), the CPU op's -------

// ---- online softmax (cpu/simd/op_attention.cpp) --------------------------------------------------
// A query's running state over the keys seen: m the largest score, l the sum of exp(score - m);
// the accumulator (sum of exp(score - m) * v) lives with the caller. l == 0 means no key yet.

struct SoftmaxState {
  float m;
  float l;
};
GGL_HD SoftmaxState softmax_empty() { return {-INFINITY, 0.0f}; }

// Takes a tile of n scores: raises the max, replaces each score by its weight exp(score - m),
// adds the weights to l, and returns the factor the accumulator must be multiplied by first.
GGL_HD float softmax_tile(SoftmaxState& s, float* scores, int n) {
  float m = s.m;
  for (int j = 0; j < n; ++j) m = fmaxf(m, scores[j]);
  const float keep = s.l > 0.0f ? expf(s.m - m) : 0.0f;
  float l = s.l * keep;
  for (int j = 0; j < n; ++j) {
    scores[j] = expf(scores[j] - m);
    l += scores[j];
  }
  s = {m, l};
  return keep;
}

// Merging partial states (key ranges of the same query): with m the largest m of the non-empty
// parts, each part's accumulator and l are weighed by merge_weight(part, m).
GGL_HD float merge_weight(SoftmaxState part, float m) { return part.l > 0.0f ? expf(part.m - m) : 0.0f; }
GGL_HD float merge_max(float m, SoftmaxState part) { return part.l > 0.0f ? fmaxf(m, part.m) : m; }
// 1 / l, or 0 for a query that saw no key (its output is zeros, as the CPU's).
GGL_HD float softmax_inverse(float l) { return l > 0.0f ? 1.0f / l : 0.0f; }

// Keys [0, visible) a query at position pos sees among n_kv cached ones.
GGL_HD int64_t visible_keys(int32_t pos, int64_t n_kv) {
  const int64_t v = static_cast<int64_t>(pos) + 1;
  return v < 0 ? 0 : v > n_kv ? n_kv : v;
}

// Split-K over the cache: keys per split, a multiple of tile, so that `splits` parts cover n_kv.
GGL_HD int64_t split_keys(int64_t n_kv, int splits, int tile) {
  const int64_t per = (n_kv + splits - 1) / splits;
  return (per + tile - 1) / tile * tile;
}

// ---- top-k (cpu/simd/op_topk.cpp) ---------------------------------------------------------------

// The order itself, topk_before and topk_group_score: core/top_k_rule.h, the CPU op's.

// The best candidate among v[begin], v[begin + stride], ... below end whose flag is set, merged into
// (best_v, best_i) (best_i < 0: none yet). One lane's share of a selection round.
GGL_HD void topk_scan(const float* v, const uint8_t* allowed, int64_t begin, int64_t end, int64_t stride, float& best_v,
                      int32_t& best_i) {
  for (int64_t j = begin; j < end; j += stride)
    if (allowed[j] && (best_i < 0 || topk_before(v[j], static_cast<int32_t>(j), best_v, best_i))) {
      best_v = v[j];
      best_i = static_cast<int32_t>(j);
    }
}

}  // namespace ggl::cuda
