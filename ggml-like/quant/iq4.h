// The 4-bit non-linear quants: 16 fixed levels (kIq4Values) times a scale. IQ4_NL: blocks of 32
// with an fp16 scale; IQ4_XS: super-blocks of 256 with 6-bit sub-block scales.
#pragma once
#include <cstdint>

#include "ggml-like/core/types.h"

namespace ggl {

// The levels a 4-bit index selects (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// IQ4_NL: value = d * kIq4Values[q]; the nibble order of Q4_0.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQuantBlock / 2];
};
// IQ4_XS: value = d * (ls - 32) * kIq4Values[q] for sub-block s = element / 32: ls's low 4 bits
// are nibble s % 2 of scales_l[s / 2], its high 2 bits bits 2s..2s+1 of scales_h; each sub-block's
// quants as an IQ4_NL block's, in qs[16 s .. 16 s + 15].
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kSuperBlock / 64];
  uint8_t qs[kSuperBlock / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136);

namespace quant {

// Sub-block s's scale of an IQ4_XS super-block, minus 32.
inline int scale_iq4_xs(const BlockIQ4_XS& b, int s) {
  return (((b.scales_l[s / 2] >> (4 * (s % 2))) & 0x0f) | (((b.scales_h >> (2 * s)) & 3) << 4)) - 32;
}

// n values into blocks, as ggml's quantize_iq4_nl / quantize_iq4_xs (what ggml_quantize_chunk
// runs, with or without an importance matrix: its scale search over 15 candidates, weighted by x^2
// or, given importance (n weights), by importance * sqrt(sigma2 + x^2), sigma2 from each
// (super-)block's mean square).
void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t n, const float* importance);
void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t n, const float* importance);

void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t n);
void dequantize_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t n);

}  // namespace quant
}  // namespace ggl
