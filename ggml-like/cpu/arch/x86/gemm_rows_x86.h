// The float side of the integer GEMMs' rows path (cpu/simd/gemm_rows.h) on x86: a block's
// products end in 8 int32 lane sums, so AVX2 and AVX-512 both scale and accumulate them in
// 256-bit vectors of 8 floats. Included by the sets' gemm_steps.h.
#pragma once
#include <cstdint>
#include <cstring>

#include "ggml-like/cpu/arch/x86/x86_intrinsics.h"

namespace ggl::GGL_ISA::gemm_rows_x86 {

using RowF = __m256;  // 8 lane sums of a row's products
inline constexpr int kRowLanes = 8;

inline RowF rzero() { return _mm256_setzero_ps(); }
inline RowF rset1(float v) { return _mm256_set1_ps(v); }
inline RowF rfmadd(RowF a, RowF b, RowF c) { return _mm256_fmadd_ps(a, b, c); }
inline RowF rfmsub(RowF a, RowF b, RowF c) { return _mm256_fmsub_ps(a, b, c); }
inline RowF rto_float(__m256i v) { return _mm256_cvtepi32_ps(v); }
inline RowF rmul(RowF a, RowF b) { return _mm256_mul_ps(a, b); }
inline RowF radd(RowF a, RowF b) { return _mm256_add_ps(a, b); }
inline RowF rload(const float* p) { return _mm256_loadu_ps(p); }  // 8 floats

// The fp16 at p as a float in every lane.
inline RowF broadcast_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h)));
}

inline float sum_lanes(RowF v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// The 32 nibbles of a 4-bit block's 16 quant bytes (element i low in byte i, element 16 + i high),
// as bytes in element order in one vector.
inline __m256i q4_nibbles(const uint8_t* qs) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)  // one variable shift of the broadcast bytes
  const __m256i bytes = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m256i shifts = _mm256_setr_epi16(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4);
  return _mm256_and_si256(_mm256_srlv_epi16(bytes, shifts), _mm256_set1_epi8(0x0F));
#else
  const __m128i both = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i low4 = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(both, 4), low4), _mm_and_si128(both, low4));
#endif
}

}  // namespace ggl::GGL_ISA::gemm_rows_x86
