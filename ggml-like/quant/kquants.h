// The K-quants: 256-value super-blocks of 16 or 8 sub-blocks whose scales (and mins) are
// themselves quantized against one or two fp16 super-block scales. Layouts and row quantizers.
#pragma once
#include <cstdint>

#include "ggml-like/core/types.h"

namespace ggl {

inline constexpr int kScaleBytesK = 12;  // 8 scales + 8 mins of 6 bits (Q4_K, Q5_K), 16 x 6 bits (Q3_K)

// Q2_K: value = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4), s = element / 16, q 2 bits.
// Element 128 h + 32 k + l (k < 4, l < 32) is bits 2k..2k+1 of qs[32 h + l].
struct BlockQ2_K {
  uint8_t scales[kSuperBlock / 16];
  uint8_t qs[kSuperBlock / 4];
  uint16_t d;
  uint16_t dmin;
};
// Q3_K: value = d * (scale[s] - 32) * (q - 4), s = element / 16, scale 6 bits packed in scales
// (low 4 bits: byte s % 8, nibble s / 8; high 2 bits: byte 8 + s % 4, bits 2 (s / 4)); q's low 2
// bits as Q2_K's, its bit 2 is bit (element / 32) of hmask[element % 32].
struct BlockQ3_K {
  uint8_t hmask[kSuperBlock / 8];
  uint8_t qs[kSuperBlock / 4];
  uint8_t scales[kScaleBytesK];
  uint16_t d;
};
// Q4_K: value = d * sc[s] * q - dmin * m[s], s = element / 32, 6-bit sc/m packed in scales
// (get_scale_min_k4); element 64 g + l (l < 32) is the low nibble of qs[32 g + l], 64 g + 32 + l its
// high nibble.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kScaleBytesK];
  uint8_t qs[kSuperBlock / 2];
};
// Q5_K: Q4_K plus a fifth bit: bit s of qh[element % 32].
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kScaleBytesK];
  uint8_t qh[kSuperBlock / 8];
  uint8_t qs[kSuperBlock / 2];
};
// Q6_K: value = d * scales[element / 16] * (q - 32), q 6 bits: in each half h of 128 elements,
// element 32 k + l has its low 4 bits in ql[64 h + l + 32 (k % 2)] (nibble k / 2) and its high 2
// bits as bits 2k..2k+1 of qh[32 h + l].
struct BlockQ6_K {
  uint8_t ql[kSuperBlock / 2];
  uint8_t qh[kSuperBlock / 4];
  int8_t scales[kSuperBlock / 16];
  uint16_t d;
};
// Q8_K: value = d * q, with the sums of each 16 quants: the activation format of ggml's K-quant
// integer dot products. Not a weight type (no model file stores it).
struct BlockQ8_K {
  float d;
  int8_t qs[kSuperBlock];
  int16_t bsums[kSuperBlock / 16];
};
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);

namespace quant {

// Sub-block j's 6-bit scale and min in a Q4_K / Q5_K scales array (ggml's get_scale_min_k4).
inline void scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Sub-block j's 6-bit scale in a Q3_K scales array, minus 32.
inline int scale_q3_k(int j, const uint8_t* scales) {
  const int low = j < 8 ? scales[j] & 0x0f : scales[j - 8] >> 4;
  const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// n values (a multiple of 256) into n / 256 super-blocks. Without importance: ggml's
// quantize_row_q*_K_ref (what ggml_quantize_chunk runs without an importance matrix); with it (n
// weights; n is then one tensor row): ggml's error-weighted quantize_row_q*_K_impl.
void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t n, const float* importance);
void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t n, const float* importance);
void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t n, const float* importance);
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t n, const float* importance);
void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t n, const float* importance);
void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t n);

void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t n);
void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t n);
void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t n);
void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t n);
void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t n);
void dequantize_q8_k(const BlockQ8_K* x, float* y, int64_t n);

}  // namespace quant
}  // namespace ggl
