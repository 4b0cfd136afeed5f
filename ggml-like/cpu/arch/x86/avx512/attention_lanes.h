// The vector the wide attention kernels (cpu/simd/attention_wide.h) put queries on where the
// compiler targets AVX-512: 16 float lanes, 32 vector registers; and, with VNNI, the 16-bit
// integer steps of the integer MHA kernel (cpu/simd/attention_int16.cpp) on the same lanes
// (VPDPWSSD).
#pragma once
#if defined(__AVX512F__)
#define GGL_ATTN_LANES 1
#include <xsimd/xsimd.hpp>

#include <cstdint>
#include <cstring>

#include "ggml-like/cpu/arch/avx512_undefined.h"
#include "ggml-like/cpu/arch/x86/x86_intrinsics.h"

namespace ggl::GGL_ISA::attention_lanes {

using Vec = xsimd::batch<float, xsimd::avx512f>;
inline constexpr int64_t kLanes = 16;
inline constexpr int kRegisters = 32;

}  // namespace ggl::GGL_ISA::attention_lanes

#if defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#define GGL_ATTN_INT16 1
namespace ggl::GGL_ISA::attention_lanes {

// ---- 16-bit integer steps (attention_int16.cpp) ----
// The integer kernel's speed over the float one at 7680 cached tokens of V2-Lite shapes, 2 threads,
// which the MLA prefill-form choice was calibrated with (docs/cpu-speed.md, "Integer attention
// speedups").
inline constexpr double kInt16Speedup = 1.7;
// Grouped heads (MLA's absorbed attention) take the integer kernel from this many heads per KV head
// on: a pass of two vectors of heads shares each key row's conversion. With one vector (16 heads)
// the gain measured too small to pay for a second kernel's rounding (docs/cpu-speed.md, "Integer
// attention speedups").
inline constexpr int64_t kGroupedInt16MinHeads = 32;
inline constexpr double kGroupedInt16Speedup = 1.4;
using IVec = xsimd::batch<int32_t, Vec::arch_type>;  // 16 int32 lanes, or 16 pairs of int16
GGL_AVX512_UNDEFINED_BEGIN
inline float largest_lane(Vec v) { return _mm512_reduce_max_ps(v); }
GGL_AVX512_UNDEFINED_END
// acc += the pairwise products of a and b (VPDPWSSD). Through asm: through the intrinsic GCC
// copies every accumulator out and back around each instruction, two extra vector moves per
// multiply.
inline void add_pair_products(IVec& acc, IVec a, IVec b) {
  __m512i r = acc;
  asm("vpdpwssd %2, %1, %0" : "+v"(r) : "v"(__m512i(a)), "v"(__m512i(b)));
  acc = r;
}
// The kLanes int32 of v (within int16's range) as int16 at out.
GGL_AVX512_UNDEFINED_BEGIN
inline void store_int16(int16_t* out, IVec v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi32_epi16(v));
}
GGL_AVX512_UNDEFINED_END
// Elements per interleave_pairs call; out[2e] = a[e], out[2e + 1] = b[e] for e < kInterleave.
inline constexpr int64_t kInterleave = 32;
inline void interleave_pairs(const int16_t* a, const int16_t* b, int16_t* out) {
  alignas(64) static constexpr int16_t kLow[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                                   8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  const __m512i low = _mm512_load_si512(kLow), high = _mm512_add_epi16(low, _mm512_set1_epi16(16));
  const __m512i x = _mm512_loadu_si512(a), y = _mm512_loadu_si512(b);
  _mm512_storeu_si512(out, _mm512_permutex2var_epi16(x, low, y));
  _mm512_storeu_si512(out + 32, _mm512_permutex2var_epi16(x, high, y));
}

}  // namespace ggl::GGL_ISA::attention_lanes
#endif
#endif
