// IEEE half (fp16) and bfloat16 conversions, bit-exact: round to nearest even, NaN stays NaN,
// subnormals and infinities handled.
#pragma once
#include <cstdint>

namespace ggl {

float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
float bf16_to_f32(uint16_t b);
uint16_t f32_to_bf16(float f);

}  // namespace ggl
