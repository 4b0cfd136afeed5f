// The innermost steps of the integer GEMMs (int_gemm.h) for the instruction set this copy of
// cpu/simd/ is compiled for, where it has them: the walks of gemm_panel.h and gemm_rows.h are
// written once and take only these from cpu/arch/<family>/<set>/gemm_steps.h. Defines
// GGL_INT_GEMM where the set has integer GEMMs, and GGL_INT_GEMM_AVX512 where it is the AVX-512
// VNNI set (the 16-lane integer kernels, e.g. attention_int16.cpp, take that).
#pragma once
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#define GGL_INT_GEMM 1
#define GGL_INT_GEMM_AVX512 1
#include "ggml-like/cpu/arch/x86/avx512/gemm_steps.h"
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define GGL_INT_GEMM 1
#include "ggml-like/cpu/arch/x86/avx2/gemm_steps.h"
#elif defined(__ARM_NEON) && defined(__aarch64__)  // both ARM sets; SDOT where __ARM_FEATURE_DOTPROD
#define GGL_INT_GEMM 1
#include "ggml-like/cpu/arch/arm/neon/gemm_steps.h"
#endif
