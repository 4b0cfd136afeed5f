// Reference (scalar, float32) quantization of rows, and the exact ggml block layouts.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ggml-like/core/types.h"

namespace ggl {

// Q8_0: 32 weights, value = d * q.
struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[kQuantBlock];
};
// Q4_0: 32 weights, value = d * (q - 8); qs[j] holds element j (low nibble) and j + 16 (high nibble).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQuantBlock / 2];
};
// Q4_1: 32 weights, value = d * q + m; same nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQuantBlock / 2];
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);

// Converts n floats into a row of type t (any of F32, F16, BF16, Q8_0, Q4_0, Q4_1).
// n must be a multiple of the type's block size. Byte-exact with ggml's reference quantizers.
void quantize_row(Type t, const float* src, void* dst, int64_t n);
// Converts a row of n elements of type t back to floats.
void dequantize_row(Type t, const void* src, float* dst, int64_t n);
// True for the types quantize_row/dequantize_row accept.
bool is_weight_type(Type t);

}  // namespace ggl
