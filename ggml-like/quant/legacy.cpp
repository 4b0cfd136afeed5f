// The 32-value block quantizers, step for step as ggml's (quantize_row_q*_ref without importance,
// quantize_row_q*_impl with it), in float32.
#include "ggml-like/quant/strict_float.h"

#include "ggml-like/quant/legacy.h"

#include <cfloat>
#include <cmath>
#include <cstring>

#include "ggml-like/core/fp16.h"
#include "ggml-like/quant/search.h"

namespace ggl::quant {
namespace {

constexpr int kHalf = kQuantBlock / 2;

// (int)v truncated toward zero and clamped to [lo, hi]. ggml converts with a plain cast, which is
// the same for every in-range value; the clamp only keeps NaN/inf inputs from being undefined.
inline int trunc_clamped(float v, int lo, int hi) {
  if (!(v >= static_cast<float>(lo))) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

// Two 4-bit levels per byte: element j in the low nibble, j + 16 in the high one.
void pack_nibbles(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kHalf; ++j) qs[j] = static_cast<uint8_t>((L[j] & 0x0f) | ((L[j + kHalf] & 0x0f) << 4));
}

// 5-bit levels: the low nibbles as above, bit 4 of element j into bit j of the little-endian qh.
void pack_q5(const uint8_t* L, uint8_t* qs, uint8_t* qh) {
  pack_nibbles(L, qs);
  uint32_t high = 0;
  for (int j = 0; j < kQuantBlock; ++j) high |= static_cast<uint32_t>((L[j] >> 4) & 1) << j;
  for (int b = 0; b < 4; ++b) qh[b] = static_cast<uint8_t>(high >> (8 * b));
}

uint32_t load_qh(const uint8_t* qh) {
  uint32_t v = 0;
  for (int b = 0; b < 4; ++b) v |= static_cast<uint32_t>(qh[b]) << (8 * b);
  return v;
}

// The importance-weighted quantizers weigh block errors by importance * sqrt(sigma2 + x^2), sigma2
// the row's mean square. Calls quantize_block(block index, x of the block, weights) per block.
template <class QuantizeBlock>
void for_weighted_blocks(const float* x, int64_t n, const float* importance, QuantizeBlock quantize_block) {
  const float sigma2 = sum_of_squares(x, n) / static_cast<float>(n);
  float weight[kQuantBlock];
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float* xb = x + b * kQuantBlock;
    importance_weights(importance + b * kQuantBlock, xb, sigma2, kQuantBlock, weight);
    quantize_block(b, xb, weight);
  }
}

// Levels into a block's quant bytes.
void pack(const uint8_t* L, BlockQ4_0& b) { pack_nibbles(L, b.qs); }
void pack(const uint8_t* L, BlockQ4_1& b) { pack_nibbles(L, b.qs); }
void pack(const uint8_t* L, BlockQ5_0& b) { pack_q5(L, b.qs, b.qh); }
void pack(const uint8_t* L, BlockQ5_1& b) { pack_q5(L, b.qs, b.qh); }

// Q4_0 / Q5_0: value d * (L - kLevels / 2). Without importance the element of largest magnitude
// maps to level 0 (-kLevels / 2, the asymmetric end).
template <int kLevels, class Block>
void quantize_symmetric(const float* x, Block* y, int64_t n, const float* importance) {
  constexpr int kMid = kLevels / 2;
  if (importance) {
    for_weighted_blocks(x, n, importance, [&](int64_t b, const float* xb, const float* weight) {
      int8_t L[kQuantBlock];
      y[b].d = f32_to_fp16(make_qx_quants(kQuantBlock, kMid, xb, L, 1, weight));
      pack(reinterpret_cast<const uint8_t*>(L), y[b]);
    });
    return;
  }
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    const float d = signed_absmax(x, kQuantBlock) / static_cast<float>(-kMid);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    uint8_t L[kQuantBlock];
    for (int j = 0; j < kQuantBlock; ++j)
      L[j] = static_cast<uint8_t>(trunc_clamped(x[j] * id + (static_cast<float>(kMid) + 0.5f), 0, kLevels - 1));
    pack(L, y[b]);
  }
}

// Q4_1 / Q5_1: value d * L + m. Without importance the block's range is split evenly.
template <int kLevels, class Block>
void quantize_with_min(const float* x, Block* y, int64_t n, const float* importance) {
  constexpr int kMax = kLevels - 1;
  if (importance) {
    for_weighted_blocks(x, n, importance, [&](int64_t b, const float* xb, const float* weight) {
      uint8_t L[kQuantBlock], Laux[kQuantBlock];
      float min;
      const float d = make_qkx_quants(kQuantBlock, kMax, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36, false);
      y[b].d = f32_to_fp16(d);
      y[b].m = f32_to_fp16(-min);
      pack(L, y[b]);
    });
    return;
  }
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < kQuantBlock; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / static_cast<float>(kMax);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    y[b].m = f32_to_fp16(min);
    uint8_t L[kQuantBlock];
    for (int j = 0; j < kQuantBlock; ++j) L[j] = static_cast<uint8_t>(trunc_clamped((x[j] - min) * id + 0.5f, 0, kMax));
    pack(L, y[b]);
  }
}

}  // namespace

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    float amax = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    for (int j = 0; j < kQuantBlock; ++j) {
      const float scaled = x[j] * id;
      // roundf: halfway cases away from zero.
      const float r = std::round(scaled);
      y[b].qs[j] = static_cast<int8_t>(r >= 127.0f ? 127 : r <= -128.0f ? -128 : static_cast<int>(r));
    }
  }
}

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t n, const float* importance) {
  quantize_symmetric<16>(x, y, n, importance);
}
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t n, const float* importance) {
  quantize_with_min<16>(x, y, n, importance);
}
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t n, const float* importance) {
  quantize_symmetric<32>(x, y, n, importance);
}
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t n, const float* importance) {
  quantize_with_min<32>(x, y, n, importance);
}

void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, y += kQuantBlock) {
    const float d = fp16_to_f32(x[b].d);
    for (int j = 0; j < kQuantBlock; ++j) y[j] = d * static_cast<float>(x[b].qs[j]);
  }
}

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, y += kQuantBlock) {
    const float d = fp16_to_f32(x[b].d);
    for (int j = 0; j < kHalf; ++j) {
      y[j] = d * static_cast<float>((x[b].qs[j] & 0x0f) - 8);
      y[j + kHalf] = d * static_cast<float>((x[b].qs[j] >> 4) - 8);
    }
  }
}

void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, y += kQuantBlock) {
    const float d = fp16_to_f32(x[b].d);
    const float m = fp16_to_f32(x[b].m);
    for (int j = 0; j < kHalf; ++j) {
      y[j] = d * static_cast<float>(x[b].qs[j] & 0x0f) + m;
      y[j + kHalf] = d * static_cast<float>(x[b].qs[j] >> 4) + m;
    }
  }
}

void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, y += kQuantBlock) {
    const float d = fp16_to_f32(x[b].d);
    const uint32_t qh = load_qh(x[b].qh);
    for (int j = 0; j < kHalf; ++j) {
      const int lo = (x[b].qs[j] & 0x0f) | static_cast<int>(((qh >> j) << 4) & 0x10);
      const int hi = (x[b].qs[j] >> 4) | static_cast<int>((qh >> (j + 12)) & 0x10);
      y[j] = static_cast<float>(lo - 16) * d;
      y[j + kHalf] = static_cast<float>(hi - 16) * d;
    }
  }
}

void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, y += kQuantBlock) {
    const float d = fp16_to_f32(x[b].d);
    const float m = fp16_to_f32(x[b].m);
    const uint32_t qh = load_qh(x[b].qh);
    for (int j = 0; j < kHalf; ++j) {
      const int lo = (x[b].qs[j] & 0x0f) | static_cast<int>(((qh >> j) << 4) & 0x10);
      const int hi = (x[b].qs[j] >> 4) | static_cast<int>((qh >> (j + 12)) & 0x10);
      y[j] = static_cast<float>(lo) * d + m;
      y[j + kHalf] = static_cast<float>(hi) * d + m;
    }
  }
}

}  // namespace ggl::quant
