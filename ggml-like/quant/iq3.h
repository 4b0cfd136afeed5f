// The 3-bit i-quants: super-blocks of 256 values in groups of 4 magnitudes, each group one point
// of a fixed grid (iq3_grids.h), with signs and per-32 sub-block scales.
#pragma once
#include <cstdint>

#include "ggml-like/core/types.h"
#include "ggml-like/quant/iq3_grids.h"

namespace ggl {

// IQ3_XXS: d; qs[0..63]: sub-block s's 8 grid points (kIq3XxsGrid indices) in qs[8 s .. 8 s + 7];
// qs[64 + 4 s .. + 3]: a little-endian word w_s whose bits 7k..7k+6 are the signs of group k
// (values 8k..8k+7 of the sub-block; iq_even_signs) and whose top 4 bits are the scale ls:
// value = d * (0.5 + ls) * 0.5 * iq3_xxs_value(level) * sign.
struct BlockIQ3_XXS {
  uint16_t d;
  uint8_t qs[3 * kSuperBlock / 8];
};
// IQ3_S: d; qs[8 s + k] the low 8 bits of point k of sub-block s (kIq3SGrid index), bit k of
// qh[s] its ninth; signs[4 s + k]: the signs of values 8k..8k+7 of sub-block s (bit j: value j);
// scales: nibble s % 2 of scales[s / 2] is ls: value = d * (1 + 2 ls) * iq3_s_value(level) * sign.
struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[kSuperBlock / 4];
  uint8_t qh[kSuperBlock / 32];
  uint8_t signs[kSuperBlock / 8];
  uint8_t scales[kSuperBlock / 64];
};
static_assert(sizeof(BlockIQ3_XXS) == 98 && sizeof(BlockIQ3_S) == 110);

namespace quant {

// Sub-block s's word of scale and signs of an IQ3_XXS block.
inline uint32_t scale_signs_iq3_xxs(const BlockIQ3_XXS& b, int s) {
  const uint8_t* p = b.qs + kSuperBlock / 4 + 4 * s;
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}
// The grid index of point k (0..7) of sub-block s of an IQ3_S block.
inline int point_iq3_s(const BlockIQ3_S& b, int s, int k) { return b.qs[8 * s + k] | (((b.qh[s] >> k) & 1) << 8); }

// n values into blocks, as ggml's quantize_iq3_xxs / quantize_iq3_s (one row): the scale search
// over the grid with its neighbour lists for off-grid points, error weighted by x^2 or, given
// importance (n weights), by importance * sqrt(sigma2 + x^2), sigma2 from each super-block's mean
// square.
void quantize_iq3_xxs(const float* x, BlockIQ3_XXS* y, int64_t n, const float* importance);
void quantize_iq3_s(const float* x, BlockIQ3_S* y, int64_t n, const float* importance);

void dequantize_iq3_xxs(const BlockIQ3_XXS* x, float* y, int64_t n);
void dequantize_iq3_s(const BlockIQ3_S* x, float* y, int64_t n);

}  // namespace quant
}  // namespace ggl
