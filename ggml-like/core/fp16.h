// IEEE half (fp16) and bfloat16 conversions, bit-exact: round to nearest even, NaN stays NaN,
// subnormals and infinities handled.
#pragma once
#include <cstdint>

namespace ggl {

// Scalar conversions. NaNs come out quiet (quiet bit set), keeping sign and the top payload bits,
// which is what the x86 F16C instructions do.
float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
float bf16_to_f32(uint16_t b);
uint16_t f32_to_bf16(float f);

// Whole rows of n values, bit-identical to the scalar functions.
void fp16_to_f32_row(const uint16_t* src, float* dst, int64_t n);
void f32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);
void bf16_to_f32_row(const uint16_t* src, float* dst, int64_t n);
void f32_to_bf16_row(const float* src, uint16_t* dst, int64_t n);

}  // namespace ggl
