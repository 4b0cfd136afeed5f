// The vector the wide attention kernels (cpu/simd/attention_wide.h) put queries on where the
// compiler targets AVX2 with FMA but not AVX-512: 8 float lanes, 16 vector registers; and the
// 16-bit integer steps of the integer MHA kernel (cpu/simd/attention_int16.cpp) on the same lanes:
// VPMADDWD + VPADDD, or VPDPWSSD where the set is compiled with AVX-VNNI (the avx2vnni set).
#pragma once
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
#define GGL_ATTN_LANES 1
#define GGL_ATTN_INT16 1
#include <xsimd/xsimd.hpp>

#include <cstdint>
#include <cstring>

#include "ggml-like/cpu/arch/x86/x86_intrinsics.h"

namespace ggl::GGL_ISA::attention_lanes {

// fma3<avx2>, not avx2: xsimd's plain avx2 batch has no fused multiply-add.
using Vec = xsimd::batch<float, xsimd::fma3<xsimd::avx2>>;
inline constexpr int64_t kLanes = 8;
inline constexpr int kRegisters = 16;

// ---- 16-bit integer steps (attention_int16.cpp) ----
// The integer kernel's speed over the float one (MHA, measured on one core), scaled by the avx512
// set's ratio of the figure its prefill-form choice was calibrated with to its ratio measured the
// same way (docs/cpu-speed.md, "Integer attention speedups").
#if defined(__AVXVNNI__)
inline constexpr double kInt16Speedup = 1.6;
#else
inline constexpr double kInt16Speedup = 1.25;
#endif
// Grouped heads (MLA's absorbed attention) keep the float kernel: without VNNI a 16-bit product
// step is two instructions (VPMADDWD + VPADDD) for 16 multiply-adds, as many as two float FMAs, so
// converting each key row is pure cost: the integer kernel measured slower on this set
// (docs/cpu-speed.md, "Integer attention speedups"). (The avx2vnni set, whose VPDPWSSD is one
// instruction, is unmeasured: no AVX-VNNI CPU was at hand.)
inline constexpr int64_t kGroupedInt16MinHeads = 0;  // never
inline constexpr double kGroupedInt16Speedup = 1.0;

using IVec = xsimd::batch<int32_t, Vec::arch_type>;  // 8 int32 lanes, or 8 pairs of int16
inline float largest_lane(Vec v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
// acc += the pairwise products of a and b. VPDPWSSD through asm: through the intrinsic GCC copies
// the accumulator out and back around each instruction.
inline void add_pair_products(IVec& acc, IVec a, IVec b) {
#if defined(__AVXVNNI__)
  __m256i r = acc;
  asm("%{vex%} vpdpwssd %2, %1, %0" : "+x"(r) : "x"(__m256i(a)), "x"(__m256i(b)));
  acc = r;
#else
  acc = _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}
// The kLanes int32 of v (within int16's range) as int16 at out.
inline void store_int16(int16_t* out, IVec v) {
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(v, v), 0x08);  // lanes 0..7 in the low half
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(packed));
}
// Elements per interleave_pairs call; out[2e] = a[e], out[2e + 1] = b[e] for e < kInterleave.
inline constexpr int64_t kInterleave = 16;
inline void interleave_pairs(const int16_t* a, const int16_t* b, int16_t* out) {
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
  const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
  const __m256i lo = _mm256_unpacklo_epi16(x, y), hi = _mm256_unpackhi_epi16(x, y);  // per 128-bit half
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permute2x128_si256(lo, hi, 0x20));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
}

}  // namespace ggl::GGL_ISA::attention_lanes
#endif
