// The 32-value block types of ggml ("legacy" quants): layouts and row quantizers.
#pragma once
#include <cstdint>

#include "ggml-like/core/types.h"

namespace ggl {

// Q8_0: value = d * q.
struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[kQuantBlock];
};
// Q4_0: value = d * (q - 8); qs[j] holds element j (low nibble) and j + 16 (high nibble).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQuantBlock / 2];
};
// Q4_1: value = d * q + m; same nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQuantBlock / 2];
};
// Q5_0: value = d * (q - 16), q 5 bits: the low 4 as in Q4_0, bit 4 of element j is bit j of qh
// (read little-endian).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQuantBlock / 2];
};
// Q5_1: value = d * q + m, q as in Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQuantBlock / 2];
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);

namespace quant {

// n values (a multiple of 32) into n / 32 blocks. importance (nullptr, or n weights) switches
// Q4_0/Q4_1/Q5_0/Q5_1 to ggml's error-weighted quantizers, which weigh by the mean square of the
// n values: with importance, n is one tensor row. Q8_0 has no weighted form.
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t n, const float* importance);
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t n, const float* importance);
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t n, const float* importance);
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t n, const float* importance);

void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t n);
void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t n);
void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t n);
void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t n);
void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t n);

}  // namespace quant
}  // namespace ggl
