// The scalar f16 and bf16 conversions, bit-exact (round to nearest even, NaN stays a quiet NaN
// keeping its sign and top payload bits, subnormals and infinities handled), written once for the
// CPU (core/fp16.h's functions and row tails) and the CUDA kernels (cuda/cuda_math.h): GGL_HD makes
// them __host__ __device__ under nvcc and is empty for the ordinary C++ compiler.
#pragma once
#include <cstdint>
#include <cstring>

#include "ggml-like/core/host_device.h"

namespace ggl {

GGL_HD float bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
GGL_HD uint32_t float_to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

GGL_HD float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f)  // inf keeps a zero mantissa; NaN gets the quiet bit
    return bits_to_float(sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0u));
  if (exp == 0)  // zero or subnormal: mant * 2^-24 is exact in float
    return bits_to_float(sign | float_to_bits(static_cast<float>(mant) * 5.9604644775390625e-8f));
  return bits_to_float(sign | ((exp + 112) << 23) | (mant << 13));  // rebias the exponent 15 -> 127
}

GGL_HD uint16_t float_to_half(float f) {
  const uint32_t u = float_to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u)  // NaN: quiet, keep the top payload bits
    return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  // 65520 (= 65504 + half an ulp) and above round to infinity (ties go to the even inf).
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a >= 0x38800000u) {
    // Normal half (>= 2^-14): rebias, then round the 13 dropped bits to nearest even. A carry
    // out of the mantissa correctly bumps the exponent.
    const uint32_t rebiased = a - (112u << 23);
    return static_cast<uint16_t>(sign | ((rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13));
  }
  // Subnormal half: the result is round(|f| / 2^-24). Below 2^-25 that is 0; 2^-25 itself ties to 0.
  const uint32_t exp = a >> 23;
  if (exp < 102) return sign;
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;  // |f| = mant * 2^(exp - 150)
  const uint32_t shift = 126 - exp;                   // in [14, 24]
  uint32_t h = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1u))) ++h;  // may become 0x400, the smallest normal
  return static_cast<uint16_t>(sign | h);
}

GGL_HD float bf16_to_float(uint16_t b) { return bits_to_float(static_cast<uint32_t>(b) << 16); }

// f32 bits -> bf16 without branches, so that row loops vectorise: round to nearest even on the
// upper 16 bits; a NaN is truncated and quietened instead (rounding could carry it into inf).
GGL_HD uint16_t bf16_from_bits(uint32_t u) {
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x0040u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}
GGL_HD uint16_t float_to_bf16(float f) { return bf16_from_bits(float_to_bits(f)); }

}  // namespace ggl
