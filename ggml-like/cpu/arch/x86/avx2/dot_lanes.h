// The float32 dot products' per-set steps (cpu/simd/dot.cpp describes them) where the compiler
// targets AVX2 with F16C but not AVX-512: 8 lanes, so a 16-entry table is two vectors.
#pragma once
#if defined(__AVX2__) && defined(__F16C__) && !defined(__AVX512F__)
#define GGL_DOT_LANES 1
#include <xsimd/xsimd.hpp>

#include <cstdint>

#include "ggml-like/cpu/arch/x86/x86_intrinsics.h"

namespace ggl::GGL_ISA::dot_lanes {

using Floats = xsimd::batch<float>;
using Ints = xsimd::batch<int32_t>;
static_assert(Floats::size == 8 && Ints::size == 8);

inline __m128i load8(const void* p) { return _mm_loadl_epi64(static_cast<const __m128i*>(p)); }
inline __m128i load16(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
inline Ints widen_u8(const uint8_t* p) { return Ints(_mm256_cvtepu8_epi32(load8(p))); }
inline Ints widen_s8(const int8_t* p) { return Ints(_mm256_cvtepi8_epi32(load8(p))); }
inline Ints widen_u16(const uint16_t* p) { return Ints(_mm256_cvtepu16_epi32(load16(p))); }
inline Floats widen_f16(const uint16_t* p) { return Floats(_mm256_cvtph_ps(load16(p))); }
inline Floats broadcast_f16(uint16_t h) { return Floats(_mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h)))); }

struct Table16 {
  Floats low, high;
};
template <class Level>
inline Table16 table16(const float* entries, Level level) {
  return {level(Floats::load_unaligned(entries)), level(Floats::load_unaligned(entries + 8))};
}
// Look up in both halves (vpermps reads the low 3 bits of each index) and pick by bit 3.
inline Floats lookup16(const Table16& table, Ints index) {
  const __m256 from_low = _mm256_permutevar8x32_ps(table.low, index);
  const __m256 from_high = _mm256_permutevar8x32_ps(table.high, index);
  return Floats(_mm256_blendv_ps(from_low, from_high, _mm256_castsi256_ps(_mm256_slli_epi32(index, 28))));
}

}  // namespace ggl::GGL_ISA::dot_lanes
#endif
