#include "ggml-like/core/fp16.h"

#include "ggml-like/core/half_bits.h"

namespace ggl {

float fp16_to_f32(uint16_t h) { return half_to_float(h); }
uint16_t f32_to_fp16(float f) { return float_to_half(f); }
float bf16_to_f32(uint16_t b) { return bf16_to_float(b); }
uint16_t f32_to_bf16(float f) { return float_to_bf16(f); }

// Scalar loops: the CPU kernels convert on vectors where it pays (cpu/simd/dot.cpp's loads); these
// serve conversion and the reference (de)quantizers, which core/ keeps free of any instruction set.
void fp16_to_f32_row(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(src[i]);
}

void f32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_half(src[i]);
}

void bf16_to_f32_row(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
}

void f32_to_bf16_row(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_bf16(src[i]);
}

}  // namespace ggl
