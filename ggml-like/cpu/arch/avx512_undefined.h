// GCC 12's AVX-512 intrinsics start many results from _mm512_undefined_*(), a vector initialized
// from itself (`__m512 __Y = __Y;`) as the pass-through operand of a mask that keeps none of it;
// where such an intrinsic is inlined into a loop, -Wmaybe-uninitialized reports that vector as
// used uninitialized (GCC bug 105593). GGL_AVX512_UNDEFINED_BEGIN ... GGL_AVX512_UNDEFINED_END
// around the project's lines that inline one, directly or through xsimd, turn that one warning off
// there and nowhere else. They expand to nothing where the compiler is not GCC or does not target
// AVX-512. Portable code (cpu/simd/) may include this: it holds no intrinsics.
#pragma once
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#define GGL_AVX512_UNDEFINED_BEGIN \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define GGL_AVX512_UNDEFINED_END _Pragma("GCC diagnostic pop")
#else
#define GGL_AVX512_UNDEFINED_BEGIN
#define GGL_AVX512_UNDEFINED_END
#endif
