// IQ2_XXS / IQ2_XS / IQ2_S: dequantizers, and quantizers step for step as ggml's
// quantize_row_iq2_xxs_impl / iq2_xs_impl / iq2_s_impl, in float32.
#include "ggml-like/quant/strict_float.h"

#include "ggml-like/quant/iq2.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ggml-like/core/error.h"
#include "ggml-like/core/fp16.h"
#include "ggml-like/quant/iq_grids.h"
#include "ggml-like/quant/iq_lattice.h"
#include "ggml-like/quant/search.h"

namespace ggl::quant {
namespace {

constexpr int kMaxQ = 3;              // level indices 0..2 stand for the odd values 1, 3, 5
constexpr float kIq2sMaxEps = 1e-8f;  // IQ2_S's all-zero threshold (ggml's GROUP_MAX_EPS_IQ2_S)

// 8 values of one group, scaled by `scale`, with their signs applied, from a decoder grid point.
inline void decode_group(uint64_t point, uint32_t signs, float scale, float* y) {
  for (int j = 0; j < 8; ++j) {
    const auto level = static_cast<float>(static_cast<uint8_t>(point >> (8 * j)));
    y[j] = scale * level * ((signs >> j) & 1 ? -1.0f : 1.0f);
  }
}

inline float sub_block_scale(float d, int s) { return d * (0.5f + static_cast<float>(s)) * 0.25f; }

// Among the lattice's neighbours of a key that is no grid point, the point nearest xval at `scale`
// in the weighted squared distance (the first of equals); L receives its level indices.
int best_neighbour(const IqLattice& lattice, uint16_t key, const float* xval, const float* weight, float scale,
                   int8_t* L) {
  int count;
  const uint16_t* list = lattice.neighbours(key, &count);
  float best_d2 = std::numeric_limits<float>::max();
  int best = -1;
  for (int j = 0; j < count; ++j) {
    float d2 = 0.0f;
    for (int i = 0; i < 8; ++i) {
      const float diff = scale * static_cast<float>(lattice.coordinate(list[j], i)) - xval[i];
      d2 += weight[i] * diff * diff;
    }
    if (d2 < best_d2) {
      best_d2 = d2;
      best = list[j];
    }
  }
  if (best < 0) fail("IQ2 quantizer: no grid point near the values (non-finite input?)");
  for (int i = 0; i < 8; ++i) L[i] = static_cast<int8_t>((lattice.coordinate(best, i) - 1) / 2);
  return best;
}

// Level indices of 8 magnitudes at inverse scale id, clamped to 0..2; snapped to the grid's best
// neighbour at `scale` where they are no point. Returns whether they were a point.
bool snap_group(const IqLattice& lattice, const float* xval, const float* waux, float id, float scale, int8_t* L) {
  for (int i = 0; i < 8; ++i)
    L[i] = static_cast<int8_t>(std::clamp(nearest_int(0.5f * (id * xval[i] - 1.0f)), 0, kMaxQ - 1));
  const uint16_t key = IqLattice::key(L);
  if (lattice.index(key) >= 0) return true;
  best_neighbour(lattice, key, xval, waux, scale, L);
  return false;
}

// sum w x q and sum w q^2 over n values with q = 2 L + 1.
void odd_level_sums(int n, const float* weight, const float* xval, const int8_t* L, float* sumqx, float* sumq2) {
  *sumqx = *sumq2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float w = weight[i], q = static_cast<float>(2 * L[i] + 1);
    *sumqx += w * xval[i] * q;
    *sumq2 += w * q * q;
  }
}

// Group k's magnitudes into xval and sign bits into the result; with even_signs, if an odd
// number are negative, the one of least weight * x^2 keeps its sign in xval instead (a negative
// magnitude) so that the count is even.
uint8_t take_signs(const float* xb, const float* weight, float* xval, bool even_signs) {
  int nflip = 0;
  uint8_t s = 0;
  for (int i = 0; i < 8; ++i) {
    if (xb[i] >= 0) {
      xval[i] = xb[i];
    } else {
      xval[i] = -xb[i];
      ++nflip;
      s = static_cast<uint8_t>(s | (1 << i));
    }
  }
  if (even_signs && nflip % 2) {
    int imin = 0;
    float min = weight[0] * xb[0] * xb[0];
    for (int i = 1; i < 8; ++i) {
      const float ax = weight[i] * xb[i] * xb[i];
      if (ax < min) {
        min = ax;
        imin = i;
      }
    }
    xval[imin] = -xval[imin];
    s = static_cast<uint8_t>(s ^ (1 << imin));
  }
  return even_signs ? static_cast<uint8_t>(s & 127) : s;
}

// The 4-bit code of a sub-block scale under the super-block scale d = max_scale / 31.
inline int scale_code(float id, float scale) { return std::clamp(nearest_int(0.5f * (id * scale - 1.0f)), 0, 15); }

void require_importance(const char* type, const float* importance) {
  if (!importance) fail("quantize_row: {} needs an importance matrix (as ggml's quantizer does)", type);
}

// One 16-value sub-block of IQ2_XS / IQ2_S (two groups): its scale, the groups' signs and level
// indices (on the grid). False for an all-zero sub-block (scale 0; its groups then stay 0).
bool search_16(const IqLattice& lattice, const float* xb, const float* weight, bool even_signs, float eps,
               uint8_t* signs, int8_t* L, float* scale_out) {
  float xval[16], waux[16];
  int8_t Laux[16];
  for (int i = 0; i < 16; ++i) waux[i] = std::sqrt(weight[i]);
  for (int k = 0; k < 2; ++k) signs[k] = take_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k, even_signs);
  float max = xval[0];
  for (int i = 1; i < 16; ++i) max = std::max(max, xval[i]);
  *scale_out = 0.0f;
  if (max < eps) return false;
  float best = 0.0f, scale = max / static_cast<float>(2 * kMaxQ - 1);
  bool on_grid[2] = {true, true};
  for (int is = -9; is <= 9; ++is) {
    const float id = (static_cast<float>(2 * kMaxQ - 1) + static_cast<float>(is) * 0.1f) / max;
    const float this_scale = 1.0f / id;
    bool on_grid_aux[2];
    for (int k = 0; k < 2; ++k)
      on_grid_aux[k] = snap_group(lattice, xval + 8 * k, waux + 8 * k, id, this_scale, Laux + 8 * k);
    float sumqx, sumq2;
    odd_level_sums(16, weight, xval, Laux, &sumqx, &sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::memcpy(L, Laux, 16);
      on_grid[0] = on_grid_aux[0];
      on_grid[1] = on_grid_aux[1];
    }
  }
  if ((!on_grid[0] || !on_grid[1]) && scale > 0) {
    const float id = 1.0f / scale;
    for (int k = 0; k < 2; ++k)
      if (!on_grid[k]) snap_group(lattice, xval + 8 * k, waux + 8 * k, id, scale, L + 8 * k);
    float sumqx, sumq2;
    odd_level_sums(16, weight, xval, L, &sumqx, &sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  if (scale < 0) {
    scale = -scale;
    for (int k = 0; k < 2; ++k) signs[k] = static_cast<uint8_t>(even_signs ? ~signs[k] & 127 : ~signs[k]);
  }
  *scale_out = scale;
  return true;
}

int grid_index_of(const IqLattice& lattice, const int8_t* L) {
  const int index = lattice.index(IqLattice::key(L));
  if (index < 0) fail("IQ2 quantizer: levels off the grid");  // the searches only keep grid points
  return index;
}

}  // namespace

void decode_iq2_xxs(const BlockIQ2_XXS& x, int sub, float* y) {
  uint32_t words[2];
  std::memcpy(words, x.qs + 4 * sub, sizeof words);
  const float db = sub_block_scale(fp16_to_f32(x.d), static_cast<int>(words[1] >> 28));
  for (int l = 0; l < 4; ++l)
    decode_group(kIq2xxsGrid.v[(words[0] >> (8 * l)) & 0xff], iq_even_signs(words[1] >> (7 * l)), db, y + 8 * l);
}

void decode_iq2_xs(const BlockIQ2_XS& x, int sub, float* y) {
  const float d = fp16_to_f32(x.d);
  const float db[2] = {sub_block_scale(d, x.scales[sub] & 0xf), sub_block_scale(d, x.scales[sub] >> 4)};
  for (int l = 0; l < 4; ++l) {
    const uint16_t q = x.qs[4 * sub + l];
    decode_group(kIq2xsGrid.v[q & 511], iq_even_signs(q >> 9), db[l / 2], y + 8 * l);
  }
}

void decode_iq2_s(const BlockIQ2_S& x, int sub, float* y) {
  const float d = fp16_to_f32(x.d);
  const float db[2] = {sub_block_scale(d, x.scales[sub] & 0xf), sub_block_scale(d, x.scales[sub] >> 4)};
  for (int l = 0; l < 4; ++l) {
    const int g = 4 * sub + l;
    const int index = x.qs[g] | ((x.qh[sub] << (8 - 2 * l)) & 0x300);
    decode_group(kIq2sGrid.v[index], x.qs[kSuperBlock / 8 + g], db[l / 2], y + 8 * l);
  }
}

void dequantize_iq2_xxs(const BlockIQ2_XXS* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i)
    for (int b = 0; b < kSuperBlock / 32; ++b, y += 32) decode_iq2_xxs(x[i], b, y);
}

void dequantize_iq2_xs(const BlockIQ2_XS* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i)
    for (int b = 0; b < kSuperBlock / 32; ++b, y += 32) decode_iq2_xs(x[i], b, y);
}

void dequantize_iq2_s(const BlockIQ2_S* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i)
    for (int b = 0; b < kSuperBlock / 32; ++b, y += 32) decode_iq2_s(x[i], b, y);
}

void quantize_iq2_xxs(const float* x, BlockIQ2_XXS* y, int64_t n, const float* importance) {
  require_importance("iq2_xxs", importance);
  const IqLattice& lattice = IqLattice::of(Type::IQ2_XXS);
  for (int64_t ibl = 0; ibl < n / kSuperBlock; ++ibl) {
    const float* xbl = x + kSuperBlock * ibl;
    BlockIQ2_XXS& out = y[ibl];
    out.d = f32_to_fp16(0.0f);
    uint32_t q2[2 * (kSuperBlock / 32)] = {};
    float scales[kSuperBlock / 32];
    float max_scale = 0.0f;
    const float sigma2 = sum_of_squares(xbl, kSuperBlock) / kSuperBlock;
    for (int ib = 0; ib < kSuperBlock / 32; ++ib) {
      const float* xb = xbl + 32 * ib;
      float weight[32], waux[32], xval[32];
      int8_t L[32], Laux[32];
      uint8_t signs[4];
      importance_weights(importance + kSuperBlock * ibl + 32 * ib, xb, sigma2, 32, weight);
      for (int i = 0; i < 32; ++i) waux[i] = std::sqrt(weight[i]);
      for (int k = 0; k < 4; ++k) signs[k] = take_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k, true);
      float max = xval[0];
      for (int i = 1; i < 32; ++i) max = std::max(max, xval[i]);
      if (max < kGroupMaxEps) {
        scales[ib] = 0.0f;
        continue;
      }
      float scale = make_qp_quants(32, kMaxQ + 1, xval, reinterpret_cast<uint8_t*>(L), weight);
      const float eff_max = scale * kMaxQ;
      float best = 0.0f;
      for (int is = -6; is <= 6; ++is) {
        const float id = (static_cast<float>(2 * kMaxQ - 1) + static_cast<float>(is) * 0.1f) / eff_max;
        const float this_scale = 1.0f / id;
        for (int k = 0; k < 4; ++k) snap_group(lattice, xval + 8 * k, waux + 8 * k, id, this_scale, Laux + 8 * k);
        float sumqx, sumq2;
        odd_level_sums(32, weight, xval, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          scale = sumqx / sumq2;
          best = scale * sumqx;
          std::memcpy(L, Laux, 32);
        }
      }
      if (scale > 0) {
        const float id = 1.0f / scale;
        for (int k = 0; k < 4; ++k) snap_group(lattice, xval + 8 * k, waux + 8 * k, id, scale, L + 8 * k);
        float sumqx, sumq2;
        odd_level_sums(32, weight, xval, L, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
      }
      if (scale < 0) {
        scale = -scale;
        for (uint8_t& s : signs) s = static_cast<uint8_t>(~s & 127);
      }
      for (int k = 0; k < 4; ++k) {
        q2[2 * ib] |= static_cast<uint32_t>(grid_index_of(lattice, L + 8 * k)) << (8 * k);
        q2[2 * ib + 1] |= static_cast<uint32_t>(signs[k]) << (7 * k);
      }
      scales[ib] = scale;
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0.0f) {
      std::memset(out.qs, 0, sizeof out.qs);
      continue;
    }
    const float d = max_scale / 31;
    out.d = f32_to_fp16(d);
    const float id = 1.0f / d;
    for (int ib = 0; ib < kSuperBlock / 32; ++ib)
      q2[2 * ib + 1] |= static_cast<uint32_t>(scale_code(id, scales[ib])) << 28;
    std::memcpy(out.qs, q2, sizeof out.qs);
  }
}

void quantize_iq2_xs(const float* x, BlockIQ2_XS* y, int64_t n, const float* importance) {
  require_importance("iq2_xs", importance);
  const IqLattice& lattice = IqLattice::of(Type::IQ2_XS);
  for (int64_t ibl = 0; ibl < n / kSuperBlock; ++ibl) {
    const float* xbl = x + kSuperBlock * ibl;
    BlockIQ2_XS& out = y[ibl];
    out.d = f32_to_fp16(0.0f);
    std::memset(out.scales, 0, sizeof out.scales);
    uint16_t q2[kSuperBlock / 8] = {};
    float scales[kSuperBlock / 16];
    float max_scale = 0.0f;
    const float sigma2 = sum_of_squares(xbl, kSuperBlock) / kSuperBlock;
    for (int ib = 0; ib < kSuperBlock / 16; ++ib) {
      const float* xb = xbl + 16 * ib;
      float weight[16];
      int8_t L[16];
      uint8_t signs[2];
      importance_weights(importance + kSuperBlock * ibl + 16 * ib, xb, sigma2, 16, weight);
      if (!search_16(lattice, xb, weight, true, kGroupMaxEps, signs, L, &scales[ib])) continue;
      const float scale = scales[ib];
      for (int k = 0; k < 2; ++k)
        q2[2 * ib + k] = static_cast<uint16_t>(grid_index_of(lattice, L + 8 * k) | (signs[k] << 9));
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0.0f) {
      std::memset(out.qs, 0, sizeof out.qs);
      continue;
    }
    const float d = max_scale / 31;
    out.d = f32_to_fp16(d);
    const float id = 1.0f / d;
    for (int ib = 0; ib < kSuperBlock / 16; ++ib)
      out.scales[ib / 2] = static_cast<uint8_t>(out.scales[ib / 2] | (scale_code(id, scales[ib]) << (4 * (ib % 2))));
    std::memcpy(out.qs, q2, sizeof out.qs);
  }
}

void quantize_iq2_s(const float* x, BlockIQ2_S* y, int64_t n, const float* importance) {
  const IqLattice& lattice = IqLattice::of(Type::IQ2_S);
  for (int64_t ibl = 0; ibl < n / kSuperBlock; ++ibl) {
    const float* xbl = x + kSuperBlock * ibl;
    BlockIQ2_S& out = y[ibl];
    std::memset(&out, 0, sizeof out);
    float scales[kSuperBlock / 16];
    float max_scale = 0.0f;
    const float sigma2 = 2 * sum_of_squares(xbl, kSuperBlock) / kSuperBlock;
    for (int ib = 0; ib < kSuperBlock / 16; ++ib) {
      const float* xb = xbl + 16 * ib;
      float weight[16];
      int8_t L[16];
      uint8_t signs[2];
      if (importance) {
        importance_weights(importance + kSuperBlock * ibl + 16 * ib, xb, sigma2, 16, weight);
      } else {
        for (int i = 0; i < 16; ++i) weight[i] = 0.25f * sigma2 + xb[i] * xb[i];
      }
      if (!search_16(lattice, xb, weight, false, kIq2sMaxEps, signs, L, &scales[ib])) continue;
      const float scale = scales[ib];
      for (int k = 0; k < 2; ++k) {
        const int g = 2 * ib + k, index = grid_index_of(lattice, L + 8 * k);
        out.qs[g] = static_cast<uint8_t>(index & 255);
        out.qh[g / 4] = static_cast<uint8_t>(out.qh[g / 4] | ((index >> 8) << (2 * (g % 4))));
        out.qs[kSuperBlock / 8 + g] = signs[k];
      }
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0.0f) continue;
    const float d = max_scale / 31;
    out.d = f32_to_fp16(d * 0.9875f);
    const float id = 1.0f / d;
    for (int ib = 0; ib < kSuperBlock / 16; ++ib)
      out.scales[ib / 2] = static_cast<uint8_t>(out.scales[ib / 2] | (scale_code(id, scales[ib]) << (4 * (ib % 2))));
  }
}

}  // namespace ggl::quant
