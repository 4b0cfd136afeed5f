#include "ggml-like/core/fp16.h"

#include <bit>

#include "ggml-like/cpu/arch/arm/arm_intrinsics.h"
#include "ggml-like/cpu/arch/x86/x86_intrinsics.h"

namespace ggl {
namespace {

constexpr uint32_t kF32AbsMask = 0x7fffffffu;
constexpr uint32_t kF32Inf = 0x7f800000u;
constexpr uint32_t kF32QuietBit = 0x00400000u;

// f32 -> bf16 without branches, so that the row loop vectorises: round to nearest even on the
// upper 16 bits; a NaN is truncated and quietened instead (rounding could carry it into inf).
inline uint16_t f32_bits_to_bf16(uint32_t u) {
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | (kF32QuietBit >> 16);
  return static_cast<uint16_t>((u & kF32AbsMask) > kF32Inf ? nan : rounded);
}

}  // namespace

float fp16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f)  // inf keeps a zero mantissa; NaN gets the quiet bit
    return std::bit_cast<float>(sign | kF32Inf | (mant << 13) | (mant ? kF32QuietBit : 0));
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in float.
    const float magnitude = static_cast<float>(mant) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  // Normal: rebias the exponent from 15 to 127.
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t f32_to_fp16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & kF32AbsMask;
  if (a > kF32Inf)  // NaN: quiet, keep the top payload bits
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
  const uint32_t shift = 126 - exp;                    // in [14, 24]
  uint32_t h = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1u))) ++h;  // may become 0x400, the smallest normal
  return static_cast<uint16_t>(sign | h);
}

float bf16_to_f32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t f32_to_bf16(float f) { return f32_bits_to_bf16(std::bit_cast<uint32_t>(f)); }

void fp16_to_f32_row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#elif defined(__ARM_NEON)
  for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + i))));
#endif
  for (; i < n; ++i) dst[i] = fp16_to_f32(src[i]);
}

void f32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#elif defined(__ARM_NEON)
  // FCVTN rounds by FPCR, which Linux leaves at round to nearest even.
  for (; i + 4 <= n; i += 4) vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
#endif
  for (; i < n; ++i) dst[i] = f32_to_fp16(src[i]);
}

void bf16_to_f32_row(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(static_cast<uint32_t>(src[i]) << 16);
}

void f32_to_bf16_row(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_bits_to_bf16(std::bit_cast<uint32_t>(src[i]));
}

}  // namespace ggl
