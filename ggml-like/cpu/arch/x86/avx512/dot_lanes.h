// The float32 dot products' per-set steps (cpu/simd/dot.cpp describes them) where the compiler
// targets AVX-512: 16 lanes, so a 16-entry table is one vector and VPERMPS looks it up.
#pragma once
#if defined(__AVX512F__)
#define GGL_DOT_LANES 1
#include <xsimd/xsimd.hpp>

#include <cstdint>

#include "ggml-like/cpu/arch/avx512_undefined.h"
#include "ggml-like/cpu/arch/x86/x86_intrinsics.h"

namespace ggl::GGL_ISA::dot_lanes {

using Floats = xsimd::batch<float>;
using Ints = xsimd::batch<int32_t>;
static_assert(Floats::size == 16 && Ints::size == 16);

inline __m128i load16(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

using Table16 = Floats;
template <class Level>
inline Table16 table16(const float* entries, Level level) {
  return level(Floats::load_unaligned(entries));
}

GGL_AVX512_UNDEFINED_BEGIN
inline Ints widen_u8(const uint8_t* p) { return Ints(_mm512_cvtepu8_epi32(load16(p))); }
inline Ints widen_s8(const int8_t* p) { return Ints(_mm512_cvtepi8_epi32(load16(p))); }
inline Ints widen_u16(const uint16_t* p) { return Ints(_mm512_cvtepu16_epi32(load32(p))); }
inline Floats widen_f16(const uint16_t* p) { return Floats(_mm512_cvtph_ps(load32(p))); }
inline Floats broadcast_f16(uint16_t h) { return Floats(_mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(h)))); }
// table[index & 15] per lane: vpermps reads only the low 4 bits of each index.
inline Floats lookup16(Table16 table, Ints index) { return Floats(_mm512_permutexvar_ps(index, table)); }
GGL_AVX512_UNDEFINED_END

}  // namespace ggl::GGL_ISA::dot_lanes
#endif
