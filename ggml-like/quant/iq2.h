// The 2-bit i-quants: super-blocks of 256 values in groups of 8, each group one point of a grid
// (iq_grids.h) with its own signs, times a 4-bit scale per 32 (IQ2_XXS) or 16 (IQ2_XS, IQ2_S)
// values: value = d * (0.5 + s) / 4 * level * sign.
#pragma once
#include <cstdint>

#include "ggml-like/core/types.h"

namespace ggl {

// IQ2_XXS: per 32 values (sub-block b), qs[4b .. 4b+3] as two little-endian words: the first
// holds the 4 groups' grid indices (a byte each), the second their 7-bit signs (bits 7l..7l+6,
// iq_even_signs) and the scale in bits 28..31.
struct BlockIQ2_XXS {
  uint16_t d;
  uint16_t qs[kSuperBlock / 8];
};
// IQ2_XS: qs[g] = grid index (9 bits) | 7 sign bits << 9 for group g; scales[b] holds the scale of
// values 32b..32b+15 in its low nibble and of 32b+16..32b+31 in its high one.
struct BlockIQ2_XS {
  uint16_t d;
  uint16_t qs[kSuperBlock / 8];
  uint8_t scales[kSuperBlock / 32];
};
// IQ2_S: group g's grid index is qs[g] plus bits 2(g%4)..2(g%4)+1 of qh[g/4] as bits 8..9; its 8
// sign bits are qs[32 + g]; scales as IQ2_XS's.
struct BlockIQ2_S {
  uint16_t d;
  uint8_t qs[kSuperBlock / 4];
  uint8_t qh[kSuperBlock / 32];
  uint8_t scales[kSuperBlock / 32];
};
static_assert(sizeof(BlockIQ2_XXS) == 66 && sizeof(BlockIQ2_XS) == 74 && sizeof(BlockIQ2_S) == 82);

namespace quant {

// n values into blocks, as ggml's quantize_iq2_xxs / iq2_xs / iq2_s: per group of 8 the signs are
// taken out (IQ2_XXS/XS flip the least important one to make their count even), the magnitudes
// snapped to the grid (or its nearest points, iq_lattice.h) over a scan of scales, weighted by
// importance * sqrt(sigma2 + x^2). IQ2_XXS and IQ2_XS need importance (n weights); IQ2_S without
// it weighs by sigma2 / 4 + x^2.
void quantize_iq2_xxs(const float* x, BlockIQ2_XXS* y, int64_t n, const float* importance);
void quantize_iq2_xs(const float* x, BlockIQ2_XS* y, int64_t n, const float* importance);
void quantize_iq2_s(const float* x, BlockIQ2_S* y, int64_t n, const float* importance);

// The 32 values of sub-block sub (0..7) of a super-block, as the dequantizers give them (the CPU
// kernels' float path decodes through these).
void decode_iq2_xxs(const BlockIQ2_XXS& x, int sub, float* y);
void decode_iq2_xs(const BlockIQ2_XS& x, int sub, float* y);
void decode_iq2_s(const BlockIQ2_S& x, int sub, float* y);

void dequantize_iq2_xxs(const BlockIQ2_XXS* x, float* y, int64_t n);
void dequantize_iq2_xs(const BlockIQ2_XS* x, float* y, int64_t n);
void dequantize_iq2_s(const BlockIQ2_S* x, float* y, int64_t n);

}  // namespace quant
}  // namespace ggl
