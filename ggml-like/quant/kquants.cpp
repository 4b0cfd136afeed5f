// The K-quant quantizers, step for step as ggml's quantize_row_q*_K_ref (no importance) and
// quantize_row_q*_K_impl (importance), in float32.
#include "ggml-like/quant/strict_float.h"

#include "ggml-like/quant/kquants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ggml-like/core/fp16.h"
#include "ggml-like/quant/search.h"

namespace ggl::quant {
namespace {

constexpr int kQK = kSuperBlock;

// Levels of 2 bits, four per byte: element 128 h + 32 k + l is bits 2k..2k+1 of qs[32 h + l].
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] =
          static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

// The weights of the importance-weighted searches for 16- or 32-value sub-block j.
void sub_block_weights(const float* importance, const float* x, float sigma2, int size, int j, float* weight) {
  importance_weights(importance + size * j, x + size * j, sigma2, size, weight);
}

float sum_of(const float* w, int n) {
  float s = 0.0f;
  for (int l = 0; l < n; ++l) s += w[l];
  return s;
}

// ---- Q2_K ----

// The 16 sub-blocks' 4-bit scales and mins (scales[j] = scale | min << 4) and their levels L.
void q2_k_requantize(const float* x, const BlockQ2_K& y, uint8_t* L) {
  const float dall = fp16_to_f32(y.d), mall = fp16_to_f32(y.dmin);
  for (int j = 0; j < kQK / 16; ++j) {
    const float d = dall * static_cast<float>(y.scales[j] & 0x0f);
    if (d == 0.0f) continue;
    const float dm = mall * static_cast<float>(y.scales[j] >> 4);
    for (int ii = 0; ii < 16; ++ii)
      L[16 * j + ii] = static_cast<uint8_t>(std::clamp(nearest_int((x[16 * j + ii] + dm) / d), 0, 3));
  }
}

void q2_k_block_ref(const float* x, BlockQ2_K& y) {
  uint8_t L[kQK], Laux[16];
  float weights[16], mins[kQK / 16], scales[kQK / 16];
  const float q4scale = 15.0f;
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < kQK / 16; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
    scales[j] = make_qkx_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  if (max_scale > 0) {
    const float iscale = q4scale / max_scale;
    for (int j = 0; j < kQK / 16; ++j) y.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
    y.d = f32_to_fp16(max_scale / q4scale);
  } else {
    std::memset(y.scales, 0, sizeof y.scales);
    y.d = f32_to_fp16(0.0f);
  }
  if (max_min > 0) {
    const float iscale = q4scale / max_min;
    for (int j = 0; j < kQK / 16; ++j)
      y.scales[j] = static_cast<uint8_t>(y.scales[j] | (nearest_int(iscale * mins[j]) << 4));
    y.dmin = f32_to_fp16(max_min / q4scale);
  } else {
    y.dmin = f32_to_fp16(0.0f);
  }
  q2_k_requantize(x, y, L);
  pack_2bit(L, y.qs);
}

void q2_k_block_weighted(const float* x, const float* importance, BlockQ2_K& y) {
  uint8_t L[kQK], Laux[16], Ls[kQK / 16], Lm[kQK / 16];
  float mins[kQK / 16], scales[kQK / 16], sw[kQK / 16], weight[16];
  const float sigma2 = sum_of_squares(x, kQK) / kQK;
  for (int j = 0; j < kQK / 16; ++j) {
    sub_block_weights(importance, x, sigma2, 16, j, weight);
    sw[j] = sum_of(weight, 16);
    scales[j] = make_qkx_quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
  }
  y.d = f32_to_fp16(make_qp_quants(kQK / 16, 15, scales, Ls, sw));
  y.dmin = f32_to_fp16(make_qp_quants(kQK / 16, 15, mins, Lm, sw));
  for (int j = 0; j < kQK / 16; ++j) y.scales[j] = static_cast<uint8_t>(Ls[j] | (Lm[j] << 4));
  q2_k_requantize(x, y, L);
  pack_2bit(L, y.qs);
}

void q2_k_block(const float* x, const float* importance, BlockQ2_K& y) {
  if (importance)
    q2_k_block_weighted(x, importance, y);
  else
    q2_k_block_ref(x, y);
}

// ---- Q3_K ----

// Packs 16 6-bit scales (already offset by 32) into Q3_K's 12 bytes.
void pack_scales_q3_k(const int* levels, uint8_t* scales) {
  std::memset(scales, 0, kScaleBytesK);
  for (int j = 0; j < kQK / 16; ++j) {
    const int l = levels[j];
    if (j < 8)
      scales[j] = static_cast<uint8_t>(l & 0x0f);
    else
      scales[j - 8] = static_cast<uint8_t>(scales[j - 8] | ((l & 0x0f) << 4));
    scales[j % 4 + 8] = static_cast<uint8_t>(scales[j % 4 + 8] | ((l >> 4) << (2 * (j / 4))));
  }
}

// Levels from the stored scales (L = level + 4), then the high bits into hmask and the low two
// into qs. Sub-blocks whose scale is zero keep the levels of the search.
void q3_k_finish(const float* x, BlockQ3_K& y, int8_t* L) {
  const float dall = fp16_to_f32(y.d);
  for (int j = 0; j < kQK / 16; ++j) {
    const float d = dall * static_cast<float>(scale_q3_k(j, y.scales));
    if (d == 0.0f) continue;
    for (int ii = 0; ii < 16; ++ii)
      L[16 * j + ii] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + ii] / d), -4, 3) + 4);
  }
  // The high bit of element j is bit j / 32 of hmask[j % 32].
  std::memset(y.hmask, 0, sizeof y.hmask);
  for (int j = 0; j < kQK; ++j) {
    if (L[j] > 3) {
      y.hmask[j % 32] = static_cast<uint8_t>(y.hmask[j % 32] | (1 << (j / 32)));
      L[j] = static_cast<int8_t>(L[j] - 4);
    }
  }
  pack_2bit(reinterpret_cast<const uint8_t*>(L), y.qs);
}

void q3_k_block_ref(const float* x, BlockQ3_K& y) {
  int8_t L[kQK];
  float scales[kQK / 16];
  for (int j = 0; j < kQK / 16; ++j) scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j, true);
  const float max_scale = signed_absmax(scales, kQK / 16);
  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    int levels[kQK / 16];
    for (int j = 0; j < kQK / 16; ++j) {
      const auto l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
      levels[j] = std::clamp<int>(l, -32, 31) + 32;
    }
    pack_scales_q3_k(levels, y.scales);
    y.d = f32_to_fp16(1.0f / iscale);
  } else {
    std::memset(y.scales, 0, sizeof y.scales);
    y.d = f32_to_fp16(0.0f);
  }
  q3_k_finish(x, y, L);
}

void q3_k_block_weighted(const float* x, const float* importance, BlockQ3_K& y) {
  int8_t L[kQK], Ls[kQK / 16];
  float scales[kQK / 16], weight[16], sw[kQK / 16];
  const float sigma2 = 2 * sum_of_squares(x, kQK) / kQK;
  for (int j = 0; j < kQK / 16; ++j) {
    sub_block_weights(importance, x, sigma2, 16, j, weight);
    sw[j] = sum_of(weight, 16);
    scales[j] = make_qx_quants(16, 4, x + 16 * j, L + 16 * j, 1, weight);
  }
  const float d_block = make_qx_quants(kQK / 16, 32, scales, Ls, 1, sw);
  int levels[kQK / 16];
  for (int j = 0; j < kQK / 16; ++j) levels[j] = Ls[j];
  pack_scales_q3_k(levels, y.scales);
  y.d = f32_to_fp16(d_block);
  q3_k_finish(x, y, L);
}

void q3_k_block(const float* x, const float* importance, BlockQ3_K& y) {
  if (importance)
    q3_k_block_weighted(x, importance, y);
  else
    q3_k_block_ref(x, y);
}

// ---- Q4_K and Q5_K: 8 sub-blocks of 32 with a 6-bit scale and min each ----

void pack_scales_k4(const uint8_t* ls, const uint8_t* lm, uint8_t* scales) {
  for (int j = 0; j < kQK / 32; ++j) {
    if (j < 4) {
      scales[j] = ls[j];
      scales[j + 4] = lm[j];
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls[j] & 0x0f) | ((lm[j] & 0x0f) << 4));
      scales[j - 4] = static_cast<uint8_t>(scales[j - 4] | ((ls[j] >> 4) << 6));
      scales[j] = static_cast<uint8_t>(scales[j] | ((lm[j] >> 4) << 6));
    }
  }
}

// The search parameters of the unweighted quantizer (they differ between Q4_K and Q5_K).
struct Qkx2Params {
  float rmin, rdelta;
  int nstep;
};

// One super-block of Q4_K or Q5_K up to its levels: sets d, dmin and scales and returns the levels
// (0..nmax) in L.
void k4_scales_and_levels(const float* x, int nmax, const float* importance, Qkx2Params search, uint16_t& d_out,
                          uint16_t& dmin_out, uint8_t* packed, uint8_t* L) {
  uint8_t Laux[32], Ls[kQK / 32], Lm[kQK / 32];
  float weights[32], mins[kQK / 32], scales[kQK / 32];
  if (!importance) {
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < kQK / 32; ++j) {
      const float av_x = std::sqrt(sum_of_squares(x + 32 * j, 32) / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
      scales[j] = make_qkx_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, search.rmin, search.rdelta,
                                  search.nstep, false);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < kQK / 32; ++j) {
      Ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
      Lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    }
    d_out = f32_to_fp16(max_scale / 63.0f);
    dmin_out = f32_to_fp16(max_min / 63.0f);
  } else {
    float sw[kQK / 32];
    const float sigma2 = 2 * sum_of_squares(x, kQK) / kQK;
    for (int j = 0; j < kQK / 32; ++j) {
      sub_block_weights(importance, x, sigma2, 32, j, weights);
      sw[j] = sum_of(weights, 32);
      scales[j] = make_qkx_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
    }
    d_out = f32_to_fp16(make_qp_quants(kQK / 32, 63, scales, Ls, sw));
    dmin_out = f32_to_fp16(make_qp_quants(kQK / 32, 63, mins, Lm, sw));
  }
  pack_scales_k4(Ls, Lm, packed);

  const float dall = fp16_to_f32(d_out), mall = fp16_to_f32(dmin_out);
  for (int j = 0; j < kQK / 32; ++j) {
    uint8_t sc, m;
    scale_min_k4(j, packed, &sc, &m);
    const float d = dall * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = mall * static_cast<float>(m);
    for (int ii = 0; ii < 32; ++ii)
      L[32 * j + ii] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + ii] + dm) / d), 0, nmax));
  }
}

// Low nibbles of element 64 g + l and 64 g + 32 + l in qs[32 g + l].
void pack_nibbles_k(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK; j += 64, qs += 32)
    for (int l = 0; l < 32; ++l) qs[l] = static_cast<uint8_t>((L[j + l] & 0x0f) | ((L[j + l + 32] & 0x0f) << 4));
}

// ---- Q6_K ----

void q6_k_block(const float* x, const float* importance, BlockQ6_K& y) {
  int8_t L[kQK];
  float scales[kQK / 16];
  // The weighted quantizer weighs by the importance itself (not importance * sqrt(...)).
  for (int ib = 0; ib < kQK / 16; ++ib)
    scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1, importance ? importance + 16 * ib : nullptr);
  float max_abs_scale;
  const float max_scale = signed_absmax(scales, kQK / 16, &max_abs_scale);
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(&y, 0, sizeof y);
    return;
  }
  const float iscale = -128.0f / max_scale;
  y.d = f32_to_fp16(1.0f / iscale);
  for (int ib = 0; ib < kQK / 16; ++ib)
    y.scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
  const float dall = fp16_to_f32(y.d);
  for (int j = 0; j < kQK / 16; ++j) {
    const float d = dall * static_cast<float>(y.scales[j]);
    if (d == 0.0f) continue;
    for (int ii = 0; ii < 16; ++ii)
      L[16 * j + ii] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + ii] / d), -32, 31) + 32);
  }
  uint8_t* ql = y.ql;
  uint8_t* qh = y.qh;
  for (int j = 0; j < kQK; j += 128, ql += 64, qh += 32) {
    for (int l = 0; l < 32; ++l) {
      const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
      ql[l] = static_cast<uint8_t>((q1 & 0x0f) | ((q3 & 0x0f) << 4));
      ql[l + 32] = static_cast<uint8_t>((q2 & 0x0f) | ((q4 & 0x0f) << 4));
      qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  }
}

// Calls quantize(x, importance (or nullptr), block) for each super-block of the row.
template <class Block, class Quantize>
void for_superblocks(const float* x, Block* y, int64_t n, const float* importance, Quantize quantize) {
  for (int64_t b = 0; b < n / kQK; ++b) quantize(x + b * kQK, importance ? importance + b * kQK : nullptr, y[b]);
}

}  // namespace

void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t n, const float* importance) {
  for_superblocks(x, y, n, importance, q2_k_block);
}

void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t n, const float* importance) {
  for_superblocks(x, y, n, importance, q3_k_block);
}

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t n, const float* importance) {
  for_superblocks(x, y, n, importance, [](const float* xb, const float* imp, BlockQ4_K& b) {
    uint8_t L[kQK];
    k4_scales_and_levels(xb, 15, imp, {-1.0f, 0.1f, 20}, b.d, b.dmin, b.scales, L);
    pack_nibbles_k(L, b.qs);
  });
}

void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t n, const float* importance) {
  for_superblocks(x, y, n, importance, [](const float* xb, const float* imp, BlockQ5_K& b) {
    uint8_t L[kQK];
    k4_scales_and_levels(xb, 31, imp, {-0.5f, 0.1f, 15}, b.d, b.dmin, b.scales, L);
    // Bit 4 of element 32 s + l is bit s of qh[l].
    std::memset(b.qh, 0, sizeof b.qh);
    for (int j = 0; j < kQK; ++j) b.qh[j % 32] = static_cast<uint8_t>(b.qh[j % 32] | ((L[j] >> 4) << (j / 32)));
    pack_nibbles_k(L, b.qs);
  });
}

void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t n, const float* importance) {
  for_superblocks(x, y, n, importance, q6_k_block);
}

void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    float amax;
    const float max = signed_absmax(x, kQK, &amax);
    std::memset(&y[b], 0, sizeof y[b]);
    if (amax == 0.0f) continue;
    // -127 (not -128): ggml keeps the quants symmetric for its IQ2 dot products.
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK; ++j) y[b].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int j = 0; j < kQK / 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += y[b].qs[16 * j + ii];
      y[b].bsums[j] = static_cast<int16_t>(sum);
    }
    y[b].d = 1.0f / iscale;
  }
}

void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = fp16_to_f32(x[b].d), min = fp16_to_f32(x[b].dmin);
    for (int j = 0; j < kQK; ++j) {
      const int h = j / 128, k = (j % 128) / 32, l = j % 32;
      const uint8_t sc = x[b].scales[j / 16];
      const float dl = d * static_cast<float>(sc & 0x0f), ml = min * static_cast<float>(sc >> 4);
      *y++ = dl * static_cast<float>((x[b].qs[32 * h + l] >> (2 * k)) & 3) - ml;
    }
  }
}

void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d_all = fp16_to_f32(x[b].d);
    for (int j = 0; j < kQK; ++j) {
      const int h = j / 128, k = (j % 128) / 32, l = j % 32;
      const float dl = d_all * static_cast<float>(scale_q3_k(j / 16, x[b].scales));
      const int low = (x[b].qs[32 * h + l] >> (2 * k)) & 3;
      const int high = (x[b].hmask[l] >> (j / 32)) & 1;
      *y++ = dl * static_cast<float>(low - (high ? 0 : 4));
    }
  }
}

void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = fp16_to_f32(x[b].d), min = fp16_to_f32(x[b].dmin);
    for (int j = 0; j < kQK; ++j) {
      const int s = j / 32, l = j % 32;
      uint8_t sc, m;
      scale_min_k4(s, x[b].scales, &sc, &m);
      const int q = (x[b].qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0x0f;
      *y++ = d * static_cast<float>(sc) * static_cast<float>(q) - min * static_cast<float>(m);
    }
  }
}

void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = fp16_to_f32(x[b].d), min = fp16_to_f32(x[b].dmin);
    for (int j = 0; j < kQK; ++j) {
      const int s = j / 32, l = j % 32;
      uint8_t sc, m;
      scale_min_k4(s, x[b].scales, &sc, &m);
      const int q = ((x[b].qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0x0f) + (((x[b].qh[l] >> s) & 1) << 4);
      *y++ = d * static_cast<float>(sc) * static_cast<float>(q) - min * static_cast<float>(m);
    }
  }
}

void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = fp16_to_f32(x[b].d);
    for (int j = 0; j < kQK; ++j) {
      const int h = j / 128, k = (j % 128) / 32, l = j % 32;
      const int low = (x[b].ql[64 * h + l + 32 * (k % 2)] >> (4 * (k / 2))) & 0x0f;
      const int high = (x[b].qh[32 * h + l] >> (2 * k)) & 3;
      *y++ = d * static_cast<float>(x[b].scales[j / 16]) * static_cast<float>((low | (high << 4)) - 32);
    }
  }
}

void dequantize_q8_k(const BlockQ8_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b)
    for (int j = 0; j < kQK; ++j) *y++ = x[b].d * static_cast<float>(x[b].qs[j]);
}

}  // namespace ggl::quant
