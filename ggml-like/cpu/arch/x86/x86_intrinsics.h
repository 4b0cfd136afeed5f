// The x86 intrinsics the SIMD kernels use, where the build targets them. (GCC 12 misreports some
// AVX-512 intrinsics' starts as uninitialized: arch/avx512_undefined.h scopes that warning off.)
#pragma once
#if defined(__AVX2__) || defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

// 256-bit VNNI: VPDPBUSD (unsigned x signed bytes, 4 products per int32 lane, added to acc) and
// VPDPWSSD (16-bit pairs) on ymm registers, from AVX-512 VNNI with VL (EVEX) or AVX-VNNI (VEX,
// Intel client cores since Alder Lake, AMD Zen 5): the same instructions, different intrinsic
// names. GGL_VNNI256 where a kernel set's build has either. In the set's namespace: every set compiles this
// header with its own flags, so an inline function at global scope would be one symbol whose
// instructions differ by set.
#if defined(GGL_ISA) && defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define GGL_VNNI256 1
namespace ggl::GGL_ISA::vnni256 {
inline __m256i dpbusd(__m256i acc, __m256i u8, __m256i s8) { return _mm256_dpbusd_epi32(acc, u8, s8); }
inline __m256i dpwssd(__m256i acc, __m256i a, __m256i b) { return _mm256_dpwssd_epi32(acc, a, b); }
}  // namespace ggl::GGL_ISA::vnni256
#elif defined(GGL_ISA) && defined(__AVXVNNI__)
#define GGL_VNNI256 1
namespace ggl::GGL_ISA::vnni256 {
inline __m256i dpbusd(__m256i acc, __m256i u8, __m256i s8) { return _mm256_dpbusd_avx_epi32(acc, u8, s8); }
inline __m256i dpwssd(__m256i acc, __m256i a, __m256i b) { return _mm256_dpwssd_avx_epi32(acc, a, b); }
}  // namespace ggl::GGL_ISA::vnni256
#endif
