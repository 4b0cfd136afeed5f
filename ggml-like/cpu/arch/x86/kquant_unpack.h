// The x86 side of the K-quant / IQ4 / Q5 types' 16-bit unpacking (cpu/arch/kquant_unpack.h, whose
// Kinds are written once for every architecture): a sub-block's 32 weights as int16 in two
// 256-bit vectors (or, where they fit, as 32 unsigned bytes), their widening and scaling, and
// their products with a 16-bit activation column on the rows path (sums). AVX2 code: the avx2,
// avx2vnni and avx512 sets take it (256-bit steps; sums() takes VPDPWSSD and VPDPBUSD where the
// set has 256-bit VNNI, kquant_madd.h). The counterpart of arch/arm/kquant_unpack.h. Included
// through arch/kquant_unpack.h only.
#pragma once
#include "ggml-like/cpu/arch/x86/kquant_blocks.h"
#if GGL_KQUANT_GEMM
#define GGL_INT16_WEIGHTS 1
#include <cstdint>

namespace ggl::GGL_ISA::unpack16 {

using kquant::load32;

// The 32 weights of a sub-block as int16, in element order: lo elements 0..15, hi 16..31.
struct Weights {
  __m256i lo, hi;
  void store(int16_t* out) const {
    _mm256_store_si256(reinterpret_cast<__m256i*>(out), lo);
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 16), hi);
  }
};

inline Weights widen_unsigned(__m256i bytes) {
  return {_mm256_cvtepu8_epi16(_mm256_castsi256_si128(bytes)),
          _mm256_cvtepu8_epi16(_mm256_extracti128_si256(bytes, 1))};
}
inline Weights widen_signed(__m256i bytes) {
  return {_mm256_cvtepi8_epi16(_mm256_castsi256_si128(bytes)),
          _mm256_cvtepi8_epi16(_mm256_extracti128_si256(bytes, 1))};
}

// (q - zero) * scale per 16 values: the types with a scale per 16 (Q3_K, Q6_K), q unsigned bytes.
inline Weights scaled_per16(__m256i q, int zero, int16_t scale_lo, int16_t scale_hi) {
  const Weights u = widen_unsigned(q);
  const __m256i z = _mm256_set1_epi16(static_cast<int16_t>(zero));
  return {_mm256_mullo_epi16(_mm256_sub_epi16(u.lo, z), _mm256_set1_epi16(scale_lo)),
          _mm256_mullo_epi16(_mm256_sub_epi16(u.hi, z), _mm256_set1_epi16(scale_hi))};
}

// q * scale per 16 values, q signed bytes: the i-quants with a scale per 16 (IQ2_XS, IQ2_S, IQ1_M).
inline Weights signed_per16(__m256i q, int16_t scale_lo, int16_t scale_hi) {
  const Weights s = widen_signed(q);
  return {_mm256_mullo_epi16(s.lo, _mm256_set1_epi16(scale_lo)), _mm256_mullo_epi16(s.hi, _mm256_set1_epi16(scale_hi))};
}

// Weights that fit unsigned bytes (Q4_K, Q5_K, Q5_1), kept as the 32 bytes in element order: the
// AVX-512 rows path multiplies them as bytes (sums below); elsewhere they widen to Weights.
struct UnsignedBytes {
  __m256i bytes;
  void store(int16_t* out) const { widen_unsigned(bytes).store(out); }
};

// 8 int32 lane sums of the 32 products of a sub-block's weights and its activations: int16 q, or
// their high (signed) and low (unsigned) bytes hi, lo, with q = 256 hi + lo (gemm_int16.cpp's
// column).
inline __m256i sums(const Weights& w, const int16_t* q, const int8_t*, const uint8_t*) {
  return kquant::add_scaled(kquant::add_scaled(_mm256_setzero_si256(), w.lo, load32(q)), w.hi, load32(q + 16));
}
inline __m256i sums(const UnsignedBytes& w, const int16_t* q, const int8_t* hi, const uint8_t* lo) {
#if GGL_VNNI256
  // VPDPBUSD on bytes: the weights times the high bytes, shifted up 8 bits, plus the weights times
  // the low bytes; no widening of the weights (exact: 4 products of at most 31 * 255 per lane).
  return vnni256::dpbusd(_mm256_slli_epi32(vnni256::dpbusd(_mm256_setzero_si256(), w.bytes, load32(hi)), 8), load32(lo),
                         w.bytes);
#else
  return sums(widen_unsigned(w.bytes), q, hi, lo);
#endif
}

// Signed weights kept as the 32 bytes in element order (the i-quants with a scale per 32 values,
// |w| <= 62): the AVX-512 / AVX-VNNI rows path multiplies them as bytes; elsewhere they widen.
struct SignedBytes {
  __m256i bytes;
  void store(int16_t* out) const { widen_signed(bytes).store(out); }
};
inline __m256i sums(const SignedBytes& w, const int16_t* q, const int8_t* hi, const uint8_t* lo) {
#if GGL_VNNI256
  // As for UnsignedBytes, with the weights' signs moved onto the (signed) high bytes and the
  // signed weights taking the unsigned low bytes' side (exact: at most 4 * 62 * 255 per lane).
  const __m256i high =
      vnni256::dpbusd(_mm256_setzero_si256(), _mm256_abs_epi8(w.bytes), _mm256_sign_epi8(load32(hi), w.bytes));
  return vnni256::dpbusd(_mm256_slli_epi32(high, 8), load32(lo), w.bytes);
#else
  return sums(widen_signed(w.bytes), q, hi, lo);
#endif
}

// out[i] = v[i] * scale for 8 bytes v (Q4_K / Q5_K's 8 sub-block scales or mins at once).
inline void scaled_floats(const uint8_t* v, float scale, float* out) {
  const __m256 floats = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(v))));
  _mm256_store_ps(out, _mm256_mul_ps(floats, _mm256_set1_ps(scale)));
}

}  // namespace ggl::GGL_ISA::unpack16
#endif
