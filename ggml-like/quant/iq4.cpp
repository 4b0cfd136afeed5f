// IQ4_NL / IQ4_XS quantizers, step for step as ggml's quantize_row_iq4_nl_impl (with ntry = 7, as
// quantize_iq4_nl and quantize_iq4_xs call it), in float32.
#include "ggml-like/quant/strict_float.h"

#include "ggml-like/quant/iq4.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ggml-like/core/fp16.h"
#include "ggml-like/quant/search.h"

namespace ggl::quant {
namespace {

constexpr int kBlock = 32;
constexpr int kTries = 7;  // scale candidates (-kTries..kTries) around the largest value's level

// Index of the level nearest x (ties to the upper level), by bisection as ggml's best_index_int8.
int best_index(float x) {
  if (x <= kIq4Values[0]) return 0;
  if (x >= kIq4Values[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < kIq4Values[mid])
      hi = mid;
    else
      lo = mid;
  }
  return x - kIq4Values[hi - 1] < kIq4Values[hi] - x ? hi - 1 : hi;
}

// The best scale for one 32-value block, its levels in L; 0 for an all-zero block.
float block_scale(const float* xb, const float* weight, uint8_t* L) {
  float amax;
  const float max = signed_absmax(xb, kBlock, &amax);
  if (amax < kGroupMaxEps) return 0.0f;
  const float v0 = kIq4Values[0];
  float d = -max / v0;
  float id = 1.0f / d;
  float sumqx = 0.0f, sumq2 = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    const int l = best_index(id * xb[j]);
    L[j] = static_cast<uint8_t>(l);
    const float q = kIq4Values[l];
    sumqx += weight[j] * q * xb[j];
    sumq2 += weight[j] * q * q;
  }
  d = sumqx / sumq2;
  float best = d * sumqx;
  for (int itry = -kTries; itry <= kTries; ++itry) {
    id = (static_cast<float>(itry) + v0) / max;
    sumqx = sumq2 = 0.0f;
    for (int j = 0; j < kBlock; ++j) {
      const float q = kIq4Values[best_index(id * xb[j])];
      sumqx += weight[j] * q * xb[j];
      sumq2 += weight[j] * q * q;
    }
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// The weights of block ib of a (super-)block of `size` values starting at x.
void block_weights(const float* x, const float* importance, float sigma2, int ib, float* weight) {
  const float* xb = x + ib * kBlock;
  if (importance)
    importance_weights(importance + ib * kBlock, xb, sigma2, kBlock, weight);
  else
    for (int j = 0; j < kBlock; ++j) weight[j] = xb[j] * xb[j];
}

float superblock_sigma2(const float* x, int size) {
  float sigma2 = sum_of_squares(x, size);
  sigma2 *= 2.0f / static_cast<float>(size);
  return sigma2;
}

void levels_for_scale(const float* xb, float d, uint8_t* L) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kBlock; ++j) L[j] = static_cast<uint8_t>(best_index(id * xb[j]));
}

void pack_nibbles(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kBlock / 2; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[j + kBlock / 2] << 4));
}

}  // namespace

void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t n, const float* importance) {
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const float* xb = x + b * kBlock;
    const float* imp = importance ? importance + b * kBlock : nullptr;
    float weight[kBlock];
    uint8_t L[kBlock] = {};
    block_weights(xb, imp, superblock_sigma2(xb, kBlock), 0, weight);
    const float d = block_scale(xb, weight, L);
    y[b].d = f32_to_fp16(d);
    // The levels for the float scale found (an all-zero block's scale 0 gives level 8, the one
    // nearest zero, as in ggml).
    levels_for_scale(xb, d, L);
    pack_nibbles(L, y[b].qs);
  }
}

void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t n, const float* importance) {
  constexpr int kSub = kSuperBlock / kBlock;
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float* xs = x + b * kSuperBlock;
    const float* imp = importance ? importance + b * kSuperBlock : nullptr;
    const float sigma2 = superblock_sigma2(xs, kSuperBlock);
    float scales[kSub], weight[kBlock];
    uint8_t L[kSuperBlock] = {};
    for (int ib = 0; ib < kSub; ++ib) {
      block_weights(xs, imp, sigma2, ib, weight);
      scales[ib] = block_scale(xs + ib * kBlock, weight, L + ib * kBlock);
    }
    const float max_scale = signed_absmax(scales, kSub);
    // Sub-block scales as 6-bit multiples of d, then each sub-block's levels for its stored scale.
    std::memset(&y[b], 0, sizeof y[b]);
    const float d = -max_scale / 32;
    y[b].d = f32_to_fp16(d);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int ib = 0; ib < kSub; ++ib) {
      const int l = std::clamp(nearest_int(id * scales[ib]), -32, 31);
      levels_for_scale(xs + ib * kBlock, d * static_cast<float>(l), L + ib * kBlock);
      const int stored = l + 32;
      y[b].scales_l[ib / 2] = static_cast<uint8_t>(y[b].scales_l[ib / 2] | ((stored & 0x0f) << (4 * (ib % 2))));
      y[b].scales_h = static_cast<uint16_t>(y[b].scales_h | ((stored >> 4) << (2 * ib)));
    }
    for (int ib = 0; ib < kSub; ++ib) pack_nibbles(L + ib * kBlock, y[b].qs + ib * kBlock / 2);
  }
}

void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlock; ++b, y += kBlock) {
    const float d = fp16_to_f32(x[b].d);
    for (int j = 0; j < kBlock / 2; ++j) {
      y[j] = d * static_cast<float>(kIq4Values[x[b].qs[j] & 0x0f]);
      y[j + kBlock / 2] = d * static_cast<float>(kIq4Values[x[b].qs[j] >> 4]);
    }
  }
}

void dequantize_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float d = fp16_to_f32(x[b].d);
    for (int ib = 0; ib < kSuperBlock / kBlock; ++ib, y += kBlock) {
      const float dl = d * static_cast<float>(scale_iq4_xs(x[b], ib));
      const uint8_t* qs = x[b].qs + ib * kBlock / 2;
      for (int j = 0; j < kBlock / 2; ++j) {
        y[j] = dl * static_cast<float>(kIq4Values[qs[j] & 0x0f]);
        y[j + kBlock / 2] = dl * static_cast<float>(kIq4Values[qs[j] >> 4]);
      }
    }
  }
}

}  // namespace ggl::quant
