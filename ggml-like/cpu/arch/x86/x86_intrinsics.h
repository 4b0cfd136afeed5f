// The x86 intrinsics the SIMD kernels use, where the build targets them. GCC 12's AVX-512
// conversion and unpack intrinsics start from _mm512_undefined_*() (a self-initialized local),
// which -Wmaybe-uninitialized / -Wuninitialized misreport at every call site, so those warnings
// are off in the files that include this.
#pragma once
#if defined(__AVX2__) || defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#endif
