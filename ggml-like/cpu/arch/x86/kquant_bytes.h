// The byte operations the K-quant / IQ4 / Q5 bit layouts (cpu/arch/kquant_bits.h) are written
// over, on AVX2 (the avx2, avx2vnni and avx512 sets): 32 bytes in element order in one 256-bit
// vector, the counterpart of arch/arm/kquant_bytes.h. Included through kquant_bits.h only.
#pragma once
#include "ggml-like/cpu/arch/x86/x86_intrinsics.h"
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define GGL_KQUANT_BYTES 1
#include <cstdint>

#include "ggml-like/quant/iq4.h"

namespace ggl::GGL_ISA::kquant {

using Bytes = __m256i;

inline float f16(uint16_t h) { return _cvtsh_ss(h); }
inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline void store32(void* p, __m256i v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
inline __m256i mask8(__m256i v, char m) { return _mm256_and_si256(v, _mm256_set1_epi8(m)); }
inline __m256i bytes_or(__m256i a, __m256i b) { return _mm256_or_si256(a, b); }
inline __m256i bytes_sub(__m256i v, char k) { return _mm256_sub_epi8(v, _mm256_set1_epi8(k)); }
inline __m256i shr16(__m256i v, int n) { return _mm256_srli_epi16(v, n); }
inline __m256i shl16(__m256i v, int n) { return _mm256_slli_epi16(v, n); }
inline __m256i bytes_sub(__m256i a, __m256i b) { return _mm256_sub_epi8(a, b); }
inline __m256i negate_where(__m256i v, __m256i mask) { return _mm256_sub_epi8(_mm256_xor_si256(v, mask), mask); }
inline __m256i bytes_of_u64(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return _mm256_setr_epi64x(static_cast<long long>(a), static_cast<long long>(b), static_cast<long long>(c),
                            static_cast<long long>(d));
}

inline __m256i nibbles_of_16(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i low = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), low), _mm_and_si128(b, low));
}

inline __m256i bits_to_bytes(uint32_t bits, char value) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
  return mask8(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), value);
}

// Bytes negated where bit e of `bits` is set (byte e): one masked subtraction where the set has
// AVX-512BW's byte masks.
inline __m256i negate_where_bits(__m256i v, uint32_t bits) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  return _mm256_mask_sub_epi8(v, bits, _mm256_setzero_si256(), v);
#else
  return negate_where(v, bits_to_bytes(bits, static_cast<char>(0xFF)));
#endif
}

// The IQ4 levels, in both 128-bit lanes, for a byte shuffle.
inline __m256i iq4_table() {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Values)));
}
inline __m256i iq4_lookup(__m256i nibbles) { return _mm256_shuffle_epi8(iq4_table(), nibbles); }

}  // namespace ggl::GGL_ISA::kquant
#endif
