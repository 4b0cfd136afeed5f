// The 1-bit i-quants: super-blocks of 256 values in groups of 8, each group one point of the
// 2048-point ternary grid (iq_grids.h: coordinates -1, 0, 1) shifted by +-1/8:
// value = scale * (coordinate + shift).
#pragma once
#include <cstdint>

#include "ggml-like/core/types.h"

namespace ggl {

// IQ1_S: per 32 values (sub-block b), qh[b] holds the high 3 bits of its 4 groups' grid indices
// (bits 3l..3l+2; the low 8 are qs[4b + l]), a 3-bit scale s in bits 12..14 (scale d * (2s + 1))
// and the shift's sign in bit 15 (set: -1/8).
struct BlockIQ1_S {
  uint16_t d;
  uint8_t qs[kSuperBlock / 8];
  uint16_t qh[kSuperBlock / 32];
};
// IQ1_M: no separate fp16 scale: its 16 bits are the top nibbles of the four little-endian words
// of scales. Per 16 values (half h of sub-block b), a 3-bit scale s (bits 6(b%2) + 3h of word b/2;
// scale d * (2s + 1)). Per group l of sub-block b: qs[4b + l] and bits 4(l%2)..4(l%2)+2 of
// qh[2b + l/2] form its grid index, bit 4(l%2)+3 the shift's sign.
struct BlockIQ1_M {
  uint8_t qs[kSuperBlock / 8];
  uint8_t qh[kSuperBlock / 16];
  uint8_t scales[kSuperBlock / 32];
};
static_assert(sizeof(BlockIQ1_S) == 50 && sizeof(BlockIQ1_M) == 56);

namespace quant {

// IQ1_M's fp16 super-block scale, gathered from the top nibbles of its scale words.
inline uint16_t iq1_m_scale_bits(const BlockIQ1_M& b) {
  auto word = [&b](int i) { return static_cast<uint16_t>(b.scales[2 * i] | (b.scales[2 * i + 1] << 8)); };
  return static_cast<uint16_t>((word(0) >> 12) | ((word(1) >> 8) & 0x00f0) | ((word(2) >> 4) & 0x0f00) |
                               (word(3) & 0xf000));
}

// n values into blocks, as ggml's quantize_iq1_s / iq1_m: per 32 (IQ1_S) or 16 (IQ1_M) values an
// exhaustive search of the two thresholds between the levels -1, 0, 1 and of the shift's sign,
// then the groups snapped to the grid (or its nearest points, iq_lattice.h); weighted by
// importance * sqrt(sigma2 + x^2). IQ1_S needs importance (n weights); IQ1_M without it weighs by x^2.
void quantize_iq1_s(const float* x, BlockIQ1_S* y, int64_t n, const float* importance);
void quantize_iq1_m(const float* x, BlockIQ1_M* y, int64_t n, const float* importance);

// The 32 values of sub-block sub (0..7) of a super-block, as the dequantizers give them (the CPU
// kernels' float path decodes through these).
void decode_iq1_s(const BlockIQ1_S& x, int sub, float* y);
void decode_iq1_m(const BlockIQ1_M& x, int sub, float* y);

void dequantize_iq1_s(const BlockIQ1_S* x, float* y, int64_t n);
void dequantize_iq1_m(const BlockIQ1_M* x, float* y, int64_t n);

}  // namespace quant
}  // namespace ggl
