// IQ3_XXS / IQ3_S quantizers, step for step as ggml's quantize_row_iq3_xxs_impl (grid of 256) and
// quantize_row_iq3_s_impl (grid of 512, sub-blocks of 32), in float32, with the search tables
// ggml's iq3xs_init_impl builds; and their dequantizers.
#include "ggml-like/quant/strict_float.h"

#include "ggml-like/quant/iq3.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/core/fp16.h"
#include "ggml-like/quant/search.h"

namespace ggl::quant {
namespace {

constexpr int kBlock = 32;             // values per sub-block (one scale)
constexpr int kGroups = kBlock / 4;    // grid points per sub-block
constexpr int kCodes = 8 * 8 * 8 * 8;  // every combination of four 3-bit levels
constexpr int kMaxLevel = 7;

// The grid as the searches see it: each point's code, where each of the kCodes codes lies (its
// point, or the list of the grid points nearest to it), as ggml's iq3xs_init_impl lays them out.
class GridSearch {
 public:
  GridSearch(const uint16_t* codes, int points, int distances) : codes_(codes, codes + points), map_(kCodes, -1) {
    for (int p = 0; p < points; ++p) map_[codes[p]] = p;
    // An off-grid code's neighbours: every point within its `distances` smallest squared distances,
    // nearest first and by index among equals (ggml's qsort on (distance, index)); stored as a count
    // followed by the indices, the map holding -(offset + 1).
    std::vector<std::pair<int, int>> by_distance(points);
    for (int code = 0; code < kCodes; ++code) {
      if (map_[code] >= 0) continue;
      for (int p = 0; p < points; ++p) {
        int d2 = 0;
        for (int i = 0; i < 4; ++i) {
          const int diff = 2 * (iq3_level(codes[p], i) - iq3_level(code, i));
          d2 += diff * diff;
        }
        by_distance[p] = {d2, p};
      }
      std::sort(by_distance.begin(), by_distance.end());
      map_[code] = -static_cast<int>(neighbours_.size()) - 1;
      const size_t count_at = neighbours_.size();
      neighbours_.push_back(0);
      int d2 = by_distance[0].first, seen = 1;
      for (const auto& [dist, p] : by_distance) {
        if (dist > d2) {
          if (seen == distances) break;
          d2 = dist;
          ++seen;
        }
        neighbours_.push_back(static_cast<uint16_t>(p));
      }
      neighbours_[count_at] = static_cast<uint16_t>(neighbours_.size() - count_at - 1);
    }
  }

  // The odd value 2 l + 1 of level i of point p, as the searches weigh it.
  float position(int p, int i) const { return static_cast<float>(2 * iq3_level(codes_[p], i) + 1); }
  // The point whose levels are L[0..3], or -1.
  int point(const int8_t* L) const { return map_[code_of(L)]; }

  // The point for the levels in L[0..3]: itself when on the grid, else (on_grid false) the
  // neighbour of least weighted error at `scale`, whose levels replace L's.
  int nearest(int8_t* L, const float* xval, const float* weight, float scale, bool* on_grid) const {
    const int m = map_[code_of(L)];
    if (on_grid) *on_grid = m >= 0;
    if (m >= 0) return m;
    const uint16_t* list = neighbours_.data() + (-m - 1);
    float best_d2 = HUGE_VALF;
    int best = -1;
    for (int j = 1; j <= list[0]; ++j) {
      float d2 = 0.0f;
      for (int i = 0; i < 4; ++i) {
        const float diff = scale * position(list[j], i) - xval[i];
        d2 += weight[i] * diff * diff;
      }
      if (d2 < best_d2) {
        best_d2 = d2;
        best = list[j];
      }
    }
    if (best < 0) fail("IQ3 quantizer: no grid point found for a group (non-finite input?)");
    for (int i = 0; i < 4; ++i) L[i] = static_cast<int8_t>(iq3_level(codes_[best], i));
    return best;
  }

 private:
  static int code_of(const int8_t* L) {
    int u = 0;
    for (int i = 0; i < 4; ++i) u |= L[i] << (3 * i);
    return u;
  }

  std::vector<uint16_t> codes_;
  std::vector<int> map_;
  std::vector<uint16_t> neighbours_;
};

const GridSearch& xxs_search() {
  static const GridSearch search(kIq3XxsGrid, kIq3XxsGridPoints, 2);
  return search;
}
const GridSearch& s_search() {
  static const GridSearch search(kIq3SGrid, kIq3SGridPoints, 3);
  return search;
}

// How the two quantizers' sub-block searches differ.
struct Variant {
  int tries;              // scale candidates -tries..tries around the largest magnitude's top level
  bool reset_on_grid;     // IQ3_S forgets which groups were on the grid before the scan
  bool refit_all_groups;  // IQ3_S refits every group at the final scale, IQ3_XXS only the off-grid ones
};
constexpr Variant kXxs{15, false, false};
constexpr Variant kS{9, true, true};

// What ggml keeps from one sub-block's search to the next (the levels and on-grid flags it does
// not reset: an unsuccessful scan leaves the previous sub-block's).
struct SearchState {
  int8_t L[kBlock] = {};
  bool on_grid[kGroups] = {};
};

int level_of(float id, float x) { return std::clamp(nearest_int(0.5f * (id * x - 1.0f)), 0, kMaxLevel); }

void fit(const int8_t* L, const float* xval, const float* weight, float* sumqx, float* sumq2) {
  *sumqx = *sumq2 = 0.0f;
  for (int i = 0; i < kBlock; ++i) {
    const float w = weight[i];
    const float q = static_cast<float>(2 * L[i] + 1);
    *sumqx += w * xval[i] * q;
    *sumq2 += w * q * q;
  }
}

// The scale of one sub-block of magnitudes xval (largest: max > 0) and its levels in st.L, all on
// the grid; the scale may come out negative (ggml then flips the signs).
float search_sub_block(const GridSearch& grid, const Variant& v, const float* xval, const float* weight,
                       const float* waux, float max, SearchState& st) {
  float best = 0.0f;
  float scale = max / (2 * kMaxLevel + 1);
  if (v.reset_on_grid) std::fill(std::begin(st.on_grid), std::end(st.on_grid), false);
  for (int is = -v.tries; is <= v.tries; ++is) {
    const float id = (static_cast<float>(2 * kMaxLevel + 1) + static_cast<float>(is) * 0.2f) / max;
    const float this_scale = 1.0f / id;
    int8_t Laux[kBlock];
    bool on_grid_aux[kGroups];
    for (int k = 0; k < kGroups; ++k) {
      for (int i = 0; i < 4; ++i) Laux[4 * k + i] = static_cast<int8_t>(level_of(id, xval[4 * k + i]));
      grid.nearest(Laux + 4 * k, xval + 4 * k, waux + 4 * k, this_scale, &on_grid_aux[k]);
    }
    float sumqx, sumq2;
    fit(Laux, xval, weight, &sumqx, &sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::copy(std::begin(Laux), std::end(Laux), st.L);
      std::copy(std::begin(on_grid_aux), std::end(on_grid_aux), st.on_grid);
    }
  }
  const bool off_grid = std::find(std::begin(st.on_grid), std::end(st.on_grid), false) != std::end(st.on_grid);
  if (off_grid && scale > 0) {
    // The groups the scan had to move to a neighbour, again at the scale found, then a refit.
    const float id = 1.0f / scale;
    for (int k = 0; k < kGroups; ++k) {
      if (!v.refit_all_groups && st.on_grid[k]) continue;
      for (int i = 0; i < 4; ++i) st.L[4 * k + i] = static_cast<int8_t>(level_of(id, xval[4 * k + i]));
      grid.nearest(st.L + 4 * k, xval + 4 * k, waux + 4 * k, scale, nullptr);
    }
    float sumqx, sumq2;
    fit(st.L, xval, weight, &sumqx, &sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  return scale;
}

// The error weights of sub-block ib of a super-block xs (and their square roots, which the
// neighbour search weighs with).
void sub_block_weights(const float* xs, const float* importance, float sigma2, int ib, float* weight, float* waux) {
  const float* xb = xs + ib * kBlock;
  if (importance)
    importance_weights(importance + ib * kBlock, xb, sigma2, kBlock, weight);
  else
    for (int i = 0; i < kBlock; ++i) weight[i] = xb[i] * xb[i];
  for (int i = 0; i < kBlock; ++i) waux[i] = std::sqrt(weight[i]);
}

float superblock_sigma2(const float* xs) { return 2 * sum_of_squares(xs, kSuperBlock) / kSuperBlock; }

// Sub-block s's 4-bit scale for the super-block scale d (ggml: the odd multiple 2 l + 1 of d).
int sub_block_scale(float id, float scale) { return std::clamp(nearest_int(0.5f * (id * scale - 1.0f)), 0, 15); }

int point_of(const GridSearch& grid, const int8_t* L) {
  const int p = grid.point(L);
  if (p < 0) fail("IQ3 quantizer: levels off the grid after the search");
  return p;
}

}  // namespace

void quantize_iq3_xxs(const float* x, BlockIQ3_XXS* y, int64_t n, const float* importance) {
  const GridSearch& grid = xxs_search();
  constexpr float kMaxEps = 1e-8f;  // ggml's GROUP_MAX_EPS_IQ3_XXS
  SearchState st;
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float* xs = x + b * kSuperBlock;
    const float* imp = importance ? importance + b * kSuperBlock : nullptr;
    BlockIQ3_XXS& out = y[b];
    std::memset(&out, 0, sizeof out);
    uint32_t words[kSuperBlock / kBlock] = {};
    float scales[kSuperBlock / kBlock];
    float max_scale = 0.0f;
    const float sigma2 = superblock_sigma2(xs);
    for (int ib = 0; ib < kSuperBlock / kBlock; ++ib) {
      const float* xb = xs + ib * kBlock;
      float weight[kBlock], waux[kBlock], xval[kBlock];
      sub_block_weights(xs, imp, sigma2, ib, weight, waux);
      // Magnitudes and signs per 8 values; the eighth sign is implied (even count of negatives), so
      // an odd count flips the value of least weighted square, which then enters as negative.
      uint32_t signs[4];
      for (int k = 0; k < 4; ++k) {
        uint32_t s = 0;
        int flips = 0;
        for (int i = 0; i < 8; ++i) {
          const float v = xb[8 * k + i];
          xval[8 * k + i] = v >= 0 ? v : -v;
          if (v < 0) {
            s |= 1u << i;
            ++flips;
          }
        }
        if (flips % 2) {
          int imin = 0;
          float min = weight[8 * k] * xb[8 * k] * xb[8 * k];
          for (int i = 1; i < 8; ++i) {
            const float ax = weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
            if (ax < min) {
              min = ax;
              imin = i;
            }
          }
          xval[8 * k + imin] = -xval[8 * k + imin];
          s ^= 1u << imin;
        }
        signs[k] = s & 127;
      }
      float max = xval[0];
      for (int i = 1; i < kBlock; ++i) max = std::max(max, xval[i]);
      if (max < kMaxEps) {
        scales[ib] = 0.0f;
        std::fill(std::begin(st.L), std::end(st.L), int8_t{0});
        continue;
      }
      float scale = search_sub_block(grid, kXxs, xval, weight, waux, max, st);
      if (scale < 0) {
        scale = -scale;
        for (uint32_t& s : signs) s = ~s & 127;
      }
      for (int k = 0; k < kGroups; ++k) out.qs[kGroups * ib + k] = static_cast<uint8_t>(point_of(grid, st.L + 4 * k));
      words[ib] = signs[0] | signs[1] << 7 | signs[2] << 14 | signs[3] << 21;
      scales[ib] = scale;
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0.0f) continue;  // all zero (the block stays zeroed)
    const float d = max_scale / 31;
    out.d = f32_to_fp16(d * 1.0125f);  // ggml's fudge factor
    const float id = 1.0f / d;
    for (int ib = 0; ib < kSuperBlock / kBlock; ++ib) {
      const uint32_t w = words[ib] | static_cast<uint32_t>(sub_block_scale(id, scales[ib])) << 28;
      for (int j = 0; j < 4; ++j) out.qs[kSuperBlock / 4 + 4 * ib + j] = static_cast<uint8_t>(w >> (8 * j));
    }
  }
}

void quantize_iq3_s(const float* x, BlockIQ3_S* y, int64_t n, const float* importance) {
  const GridSearch& grid = s_search();
  SearchState st;
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float* xs = x + b * kSuperBlock;
    const float* imp = importance ? importance + b * kSuperBlock : nullptr;
    BlockIQ3_S& out = y[b];
    std::memset(&out, 0, sizeof out);
    // ggml advances its qs and signs cursors only for sub-blocks that are not all zero, so the
    // sub-blocks after an all-zero one are stored one place early (qh and scales are by index).
    uint8_t* qs = out.qs;
    uint8_t* signs = out.signs;
    float scales[kSuperBlock / kBlock];
    float max_scale = 0.0f;
    const float sigma2 = superblock_sigma2(xs);
    for (int ib = 0; ib < kSuperBlock / kBlock; ++ib) {
      const float* xb = xs + ib * kBlock;
      float weight[kBlock], waux[kBlock], xval[kBlock];
      sub_block_weights(xs, imp, sigma2, ib, weight, waux);
      uint8_t block_signs[4];
      for (int k = 0; k < 4; ++k) {
        uint8_t s = 0;
        for (int i = 0; i < 8; ++i) {
          const float v = xb[8 * k + i];
          xval[8 * k + i] = v >= 0 ? v : -v;
          if (v < 0) s = static_cast<uint8_t>(s | (1u << i));
        }
        block_signs[k] = s;
      }
      float max = xval[0];
      for (int i = 1; i < kBlock; ++i) max = std::max(max, xval[i]);
      if (max == 0.0f) {
        scales[ib] = 0.0f;
        continue;
      }
      float scale = search_sub_block(grid, kS, xval, weight, waux, max, st);
      if (scale < 0) {
        scale = -scale;
        for (uint8_t& s : block_signs) s = static_cast<uint8_t>(~s);
      }
      for (int k = 0; k < kGroups; ++k) {
        const int p = point_of(grid, st.L + 4 * k);
        qs[k] = static_cast<uint8_t>(p & 255);
        out.qh[ib] = static_cast<uint8_t>(out.qh[ib] | ((p >> 8) << k));
      }
      qs += kGroups;
      std::copy(std::begin(block_signs), std::end(block_signs), signs);
      signs += 4;
      scales[ib] = scale;
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0.0f) continue;
    const float d = max_scale / 31;
    out.d = f32_to_fp16(d * 1.033f);  // ggml's fudge factor
    const float id = 1.0f / d;
    for (int ib = 0; ib < kSuperBlock / kBlock; ib += 2)
      out.scales[ib / 2] =
          static_cast<uint8_t>(sub_block_scale(id, scales[ib]) | sub_block_scale(id, scales[ib + 1]) << 4);
  }
}

void dequantize_iq3_xxs(const BlockIQ3_XXS* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float d = fp16_to_f32(x[b].d);
    for (int ib = 0; ib < kSuperBlock / kBlock; ++ib) {
      const uint32_t w = scale_signs_iq3_xxs(x[b], ib);
      const float db = d * (0.5f + static_cast<float>(w >> 28)) * 0.5f;
      for (int k = 0; k < kGroups; ++k, y += 4) {
        const uint32_t code = kIq3XxsGrid[x[b].qs[kGroups * ib + k]];
        const uint32_t signs = iq_even_signs(w >> (7 * (k / 2))) >> (4 * (k % 2));
        for (int i = 0; i < 4; ++i) {
          const float v = db * static_cast<float>(iq3_xxs_value(iq3_level(code, i)));
          y[i] = (signs >> i) & 1 ? -v : v;
        }
      }
    }
  }
}

void dequantize_iq3_s(const BlockIQ3_S* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float d = fp16_to_f32(x[b].d);
    for (int ib = 0; ib < kSuperBlock / kBlock; ++ib) {
      const float db = d * static_cast<float>(1 + 2 * ((x[b].scales[ib / 2] >> (4 * (ib % 2))) & 0x0f));
      for (int k = 0; k < kGroups; ++k, y += 4) {
        const uint32_t code = kIq3SGrid[point_iq3_s(x[b], ib, k)];
        const uint32_t signs = x[b].signs[4 * ib + k / 2] >> (4 * (k % 2));
        for (int i = 0; i < 4; ++i) {
          const float v = db * static_cast<float>(iq3_s_value(iq3_level(code, i)));
          y[i] = (signs >> i) & 1 ? -v : v;
        }
      }
    }
  }
}

}  // namespace ggl::quant
