// IQ1_S / IQ1_M: dequantizers, and quantizers step for step as ggml's quantize_row_iq1_s_impl /
// iq1_m_impl, in float32.
#include "ggml-like/quant/strict_float.h"

#include "ggml-like/quant/iq1.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <numeric>

#include "ggml-like/core/error.h"
#include "ggml-like/core/fp16.h"
#include "ggml-like/quant/iq_grids.h"
#include "ggml-like/quant/iq_lattice.h"
#include "ggml-like/quant/search.h"

namespace ggl::quant {
namespace {

constexpr float kIq1sMaxEps = 1e-12f;  // ggml's GROUP_MAX_EPS_IQ1_S
constexpr float kIq1mMaxEps = 1e-7f;   // ggml's GROUP_MAX_EPS_IQ1_M

// The values of the levels -1, 0, 1 with the shift +1/8 (kPlus) or -1/8 (kMinus).
constexpr float kPlus[3] = {-1 + kIq1Delta, kIq1Delta, 1 + kIq1Delta};
constexpr float kMinus[3] = {-1 - kIq1Delta, -kIq1Delta, 1 - kIq1Delta};

inline void decode_group(uint64_t point, float scale, float delta, float* y) {
  for (int j = 0; j < 8; ++j) y[j] = scale * (static_cast<float>(static_cast<int8_t>(point >> (8 * j))) + delta);
}

// The order of xb's n values, ascending (equal values keep their order, as glibc's merge sort
// in ggml's qsort does).
void ascending(const float* xb, int n, int* order) {
  std::iota(order, order + n, 0);
  std::stable_sort(order, order + n, [xb](int a, int b) { return xb[a] < xb[b]; });
}

// Level indices L (0..2) from the two thresholds in sorted order.
void split_levels(const int* order, int n, int i1, int i2, int8_t* L) {
  for (int j = 0; j < n; ++j) L[order[j]] = static_cast<int8_t>(j < i1 ? 0 : j < i2 ? 1 : 2);
}

// Among the lattice's neighbours of a key that is no grid point, the one nearest xval at `scale`
// with level values xg (weighted squared distance; the first of equals); L receives its indices.
int best_neighbour(const IqLattice& lattice, uint16_t key, const float* xval, const float* weight, float scale,
                   const float* xg, int8_t* L) {
  int count;
  const uint16_t* list = lattice.neighbours(key, &count);
  float best_d2 = FLT_MAX;
  int best = -1;
  for (int j = 0; j < count; ++j) {
    float d2 = 0.0f;
    for (int i = 0; i < 8; ++i) {
      const float diff = scale * xg[(lattice.coordinate(list[j], i) - 1) / 2] - xval[i];
      d2 += weight[i] * diff * diff;
    }
    if (d2 < best_d2) {
      best_d2 = d2;
      best = list[j];
    }
  }
  if (best < 0) fail("IQ1 quantizer: no grid point near the values (non-finite input?)");
  for (int i = 0; i < 8; ++i) L[i] = static_cast<int8_t>((lattice.coordinate(best, i) - 1) / 2);
  return best;
}

// The grid indices of `groups` groups of 8 level indices, the off-grid ones replaced by their
// best neighbour (xx(k): group k's level values). Returns whether all were grid points.
template <class LevelValues>
bool snap_groups(const IqLattice& lattice, int groups, const float* xb, const float* weight, float scale,
                 LevelValues xx, int8_t* L, uint16_t* index) {
  bool all_on_grid = true;
  for (int k = 0; k < groups; ++k) {
    const uint16_t key = IqLattice::key(L + 8 * k);
    int g = lattice.index(key);
    if (g < 0) {
      all_on_grid = false;
      g = best_neighbour(lattice, key, xb + 8 * k, weight + 8 * k, scale, xx(k), L + 8 * k);
    }
    index[k] = static_cast<uint16_t>(g);
  }
  return all_on_grid;
}

// The least-squares scale of the groups' grid points (level values xx(k)), where positive.
template <class LevelValues>
float refit_scale(const IqLattice& lattice, int groups, const float* xb, const float* weight, LevelValues xx,
                  const uint16_t* index, float scale) {
  float sumqx = 0.0f, sumq2 = 0.0f;
  for (int k = 0; k < groups; ++k) {
    for (int j = 0; j < 8; ++j) {
      const float w = weight[8 * k + j], q = xx(k)[(lattice.coordinate(index[k], j) - 1) / 2];
      sumqx += w * q * xb[8 * k + j];
      sumq2 += w * q * q;
    }
  }
  return sumqx > 0 && sumq2 > 0 ? sumqx / sumq2 : scale;
}

inline float max_abs(const float* x, int n) {
  float max = std::fabs(x[0]);
  for (int i = 1; i < n; ++i) max = std::max(max, std::fabs(x[i]));
  return max;
}

inline int scale_code(float id, float scale) { return std::clamp(nearest_int(0.5f * (id * scale - 1.0f)), 0, 7); }

}  // namespace

void decode_iq1_s(const BlockIQ1_S& x, int sub, float* y) {
  const uint32_t qh = x.qh[sub];
  const float dl = fp16_to_f32(x.d) * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
  const float delta = qh & 0x8000 ? -kIq1Delta : kIq1Delta;
  for (int l = 0; l < 4; ++l)
    decode_group(kIq1sGrid.v[x.qs[4 * sub + l] | (((qh >> (3 * l)) & 7) << 8)], dl, delta, y + 8 * l);
}

void decode_iq1_m(const BlockIQ1_M& x, int sub, float* y) {
  const float d = fp16_to_f32(iq1_m_scale_bits(x));
  const uint32_t word = x.scales[2 * (sub / 2)] | (x.scales[2 * (sub / 2) + 1] << 8);
  for (int l = 0; l < 4; ++l) {
    const uint32_t qh = x.qh[2 * sub + l / 2] >> (4 * (l % 2));
    const float dl = d * static_cast<float>(2 * ((word >> (6 * (sub % 2) + 3 * (l / 2))) & 7) + 1);
    decode_group(kIq1sGrid.v[x.qs[4 * sub + l] | ((qh & 7) << 8)], dl, qh & 8 ? -kIq1Delta : kIq1Delta, y + 8 * l);
  }
}

void dequantize_iq1_s(const BlockIQ1_S* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i)
    for (int b = 0; b < kSuperBlock / 32; ++b, y += 32) decode_iq1_s(x[i], b, y);
}

void dequantize_iq1_m(const BlockIQ1_M* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i)
    for (int b = 0; b < kSuperBlock / 32; ++b, y += 32) decode_iq1_m(x[i], b, y);
}

void quantize_iq1_s(const float* x, BlockIQ1_S* y, int64_t n, const float* importance) {
  if (!importance) fail("quantize_row: iq1_s needs an importance matrix (as ggml's quantizer does)");
  constexpr int kBlock = 32;
  const IqLattice& lattice = IqLattice::of(Type::IQ1_S);
  for (int64_t ibl = 0; ibl < n / kSuperBlock; ++ibl) {
    const float* xbl = x + kSuperBlock * ibl;
    BlockIQ1_S& out = y[ibl];
    std::memset(&out, 0, sizeof out);
    float scales[kSuperBlock / kBlock];
    int8_t shifts[kSuperBlock / kBlock] = {};
    float max_scale = 0.0f;
    const float sigma2 = 2 * sum_of_squares(xbl, kSuperBlock) / kSuperBlock;
    for (int ib = 0; ib < kSuperBlock / kBlock; ++ib) {
      const float* xb = xbl + kBlock * ib;
      float weight[kBlock], sumx[kBlock + 1], sumw[kBlock + 1];
      int order[kBlock];
      int8_t L[kBlock];
      importance_weights(importance + kSuperBlock * ibl + kBlock * ib, xb, sigma2, kBlock, weight);
      const float max = max_abs(xb, kBlock);
      if (max < kIq1sMaxEps) {
        scales[ib] = 0.0f;
        continue;
      }
      // The best split of the sorted values into the levels -1, 0, 1 (thresholds i1 <= i2) and
      // shift, exhaustively, from prefix sums of w x and w.
      ascending(xb, kBlock, order);
      sumx[0] = sumw[0] = 0.0f;
      for (int j = 0; j < kBlock; ++j) {
        const int i = order[j];
        sumx[j + 1] = sumx[j] + weight[i] * xb[i];
        sumw[j + 1] = sumw[j] + weight[i];
      }
      float best_score = -FLT_MIN, scale = max;
      int besti1 = -1, besti2 = -1, best_shift = 0;
      for (int i1 = 0; i1 <= kBlock; ++i1) {
        for (int i2 = i1; i2 <= kBlock; ++i2) {
          for (const int shift : {1, -1}) {
            const float* v = shift == 1 ? kPlus : kMinus;
            const float sumqx =
                (sumx[i1] - sumx[0]) * v[0] + (sumx[i2] - sumx[i1]) * v[1] + (sumx[kBlock] - sumx[i2]) * v[2];
            const float sumq2 = (sumw[i1] - sumw[0]) * v[0] * v[0] + (sumw[i2] - sumw[i1]) * v[1] * v[1] +
                                (sumw[kBlock] - sumw[i2]) * v[2] * v[2];
            if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
              scale = sumqx / sumq2;
              best_score = scale * sumqx;
              besti1 = i1;
              besti2 = i2;
              best_shift = shift;
            }
          }
        }
      }
      if (besti1 < 0) fail("IQ1_S quantizer: no split of the values (non-finite input?)");
      split_levels(order, kBlock, besti1, besti2, L);
      if (scale < 0) {
        for (int8_t& l : L) l = static_cast<int8_t>(2 - l);
        scale = -scale;
        best_shift = -best_shift;
      }
      const float* xx = best_shift == 1 ? kPlus : kMinus;
      auto levels = [xx](int) { return xx; };
      uint16_t index[kBlock / 8];
      if (!snap_groups(lattice, kBlock / 8, xb, weight, scale, levels, L, index))
        scale = refit_scale(lattice, kBlock / 8, xb, weight, levels, index, scale);
      uint16_t h = 0;
      for (int k = 0; k < kBlock / 8; ++k) {
        out.qs[(kBlock / 8) * ib + k] = static_cast<uint8_t>(index[k] & 255);
        h = static_cast<uint16_t>(h | ((index[k] >> 8) << (3 * k)));
      }
      out.qh[ib] = h;
      scales[ib] = scale;
      shifts[ib] = static_cast<int8_t>(best_shift);
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0.0f) continue;
    const float d = max_scale / 15;
    out.d = f32_to_fp16(d * 1.125f);
    const float id = 1.0f / d;
    for (int ib = 0; ib < kSuperBlock / kBlock; ++ib) {
      const int l = scale_code(id, scales[ib]) | (shifts[ib] == -1 ? 8 : 0);
      out.qh[ib] = static_cast<uint16_t>(out.qh[ib] | (l << 12));
    }
  }
}

void quantize_iq1_m(const float* x, BlockIQ1_M* y, int64_t n, const float* importance) {
  constexpr int kBlock = 16;
  // Shift combinations of a 16-value block's two groups: 0 (+, +), 1 (+, -), 2 (-, +), 3 (-, -);
  // the qh bits that store the second one.
  constexpr uint8_t kShiftBits[4] = {0x00, 0x80, 0x08, 0x88};
  auto group_levels = [](int combination) {
    return [combination](int k) { return (k == 0 ? combination < 2 : combination % 2 == 0) ? kPlus : kMinus; };
  };
  const IqLattice& lattice = IqLattice::of(Type::IQ1_M);
  for (int64_t ibl = 0; ibl < n / kSuperBlock; ++ibl) {
    const float* xbl = x + kSuperBlock * ibl;
    BlockIQ1_M& out = y[ibl];
    std::memset(&out, 0, sizeof out);
    float scales[kSuperBlock / kBlock];
    int shifts[kSuperBlock / kBlock] = {};
    float max_scale = 0.0f;
    const float sigma2 = 2 * sum_of_squares(xbl, kSuperBlock) / kSuperBlock;
    auto block_weights = [&](int ib, float* weight) {
      const float* xb = xbl + kBlock * ib;
      if (importance) {
        importance_weights(importance + kSuperBlock * ibl + kBlock * ib, xb, sigma2, kBlock, weight);
      } else {
        for (int i = 0; i < kBlock; ++i) weight[i] = xb[i] * xb[i];
      }
    };
    for (int ib = 0; ib < kSuperBlock / kBlock; ++ib) {
      const float* xb = xbl + kBlock * ib;
      float weight[kBlock];
      int order[kBlock];
      int8_t L[kBlock];
      block_weights(ib, weight);
      const float max = max_abs(xb, kBlock);
      if (max < kIq1mMaxEps) {
        scales[ib] = 0.0f;
        continue;
      }
      ascending(xb, kBlock, order);
      float best_score = -FLT_MIN, scale = max;
      int besti1 = -1, besti2 = -1, best_k = -1;
      for (int i1 = 0; i1 <= kBlock; ++i1) {
        for (int i2 = i1; i2 <= kBlock; ++i2) {
          float sumqx[4] = {}, sumq2[4] = {};
          for (int j = 0; j < kBlock; ++j) {
            const int i = order[j], level = j < i1 ? 0 : j < i2 ? 1 : 2;
            for (int k = 0; k < 4; ++k) {
              const float v = group_levels(k)(i < kBlock / 2 ? 0 : 1)[level];
              sumqx[k] += weight[i] * v * xb[i];
              sumq2[k] += weight[i] * v * v;
            }
          }
          for (int k = 0; k < 4; ++k) {
            if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > best_score * sumq2[k]) {
              scale = sumqx[k] / sumq2[k];
              best_score = scale * sumqx[k];
              besti1 = i1;
              besti2 = i2;
              best_k = k;
            }
          }
        }
      }
      if (best_k < 0) fail("IQ1_M quantizer: no split of the values (non-finite input?)");
      split_levels(order, kBlock, besti1, besti2, L);
      if (scale < 0) {
        for (int8_t& l : L) l = static_cast<int8_t>(2 - l);
        scale = -scale;
        best_k = 3 - best_k;
      }
      uint16_t index[kBlock / 8];
      if (!snap_groups(lattice, kBlock / 8, xb, weight, scale, group_levels(best_k), L, index))
        scale = refit_scale(lattice, kBlock / 8, xb, weight, group_levels(best_k), index, scale);
      out.qs[2 * ib] = static_cast<uint8_t>(index[0] & 255);
      out.qs[2 * ib + 1] = static_cast<uint8_t>(index[1] & 255);
      out.qh[ib] = static_cast<uint8_t>((index[0] >> 8) | ((index[1] >> 8) << 4));
      scales[ib] = scale;
      shifts[ib] = best_k;
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0.0f) continue;

    // The super-block scale: the 3-bit codes first, then the least-squares d over every value.
    uint16_t sc[4] = {};
    float d = max_scale / 15;
    const float id = 1.0f / d;
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int ib = 0; ib < kSuperBlock / kBlock; ++ib) {
      const int l = scale_code(id, scales[ib]);
      sc[ib / 4] = static_cast<uint16_t>(sc[ib / 4] | (l << (3 * (ib % 4))));
      out.qh[ib] = static_cast<uint8_t>(out.qh[ib] | kShiftBits[shifts[ib]]);
      const float* xb = xbl + kBlock * ib;
      float weight[kBlock];
      block_weights(ib, weight);
      const auto xx = group_levels(shifts[ib]);
      for (int k = 0; k < 2; ++k) {
        const int g = out.qs[2 * ib + k] + ((out.qh[ib] << (8 - 4 * k)) & 0x700);
        for (int j = 0; j < 8; ++j) {
          const float w = weight[8 * k + j];
          const float q = xx(k)[(lattice.coordinate(g, j) - 1) / 2] * static_cast<float>(2 * l + 1);
          sumqx += w * q * xb[8 * k + j];
          sumq2 += w * q * q;
        }
      }
    }
    if (sumq2 > 0) d = sumqx / sumq2;
    const uint16_t s = f32_to_fp16(d * 1.1125f);
    sc[0] = static_cast<uint16_t>(sc[0] | ((s & 0x000f) << 12));
    sc[1] = static_cast<uint16_t>(sc[1] | ((s & 0x00f0) << 8));
    sc[2] = static_cast<uint16_t>(sc[2] | ((s & 0x0f00) << 4));
    sc[3] = static_cast<uint16_t>(sc[3] | (s & 0xf000));
    for (int i = 0; i < 4; ++i) {
      out.scales[2 * i] = static_cast<uint8_t>(sc[i] & 0xff);
      out.scales[2 * i + 1] = static_cast<uint8_t>(sc[i] >> 8);
    }
  }
}

}  // namespace ggl::quant
