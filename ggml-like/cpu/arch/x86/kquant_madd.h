// The multiply-add steps of the K-quant / IQ4 / Q5 integer kernels (kquant_blocks.h), the only
// part of them that differs between x86 instruction sets. The weights arrive as 32 unsigned
// bytes (quants already unpacked), the activations as 32 signed bytes; the step adds their
// products into 8 int32 lanes, lanes 0..3 from bytes 0..15 and lanes 4..7 from bytes 16..31 (so a
// scale per 16 values applies lane-wise). AVX2 builds (the avx2, avx2vnni and avx512 sets).
#pragma once
#include "ggml-like/cpu/arch/x86/x86_intrinsics.h"
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define GGL_KQUANT_GEMM 1

namespace ggl::GGL_ISA::kquant {

// 16 int16 sums of adjacent byte products. Never saturates here: the unsigned side is a quant of
// at most 6 bits (or an IQ4 level's magnitude, <= 127) and activations are within +-127.
inline __m256i pair_sums(__m256i w_u8, __m256i x_s8) { return _mm256_maddubs_epi16(w_u8, x_s8); }

// The same for signed weights (IQ4 levels): the weight's sign moves onto the activation.
inline __m256i pair_sums_signed(__m256i w_s8, __m256i x_s8) {
  return _mm256_maddubs_epi16(_mm256_sign_epi8(w_s8, w_s8), _mm256_sign_epi8(x_s8, w_s8));
}

#if GGL_VNNI256
// acc + pairs * scales, adjacent pairs summed into int32 lanes (VPDPWSSD).
inline __m256i add_scaled(__m256i acc, __m256i pairs, __m256i scales16) {
  return vnni256::dpwssd(acc, pairs, scales16);
}
// acc + the 32 byte products, 4 per int32 lane (VPDPBUSD).
inline __m256i add_products(__m256i acc, __m256i w_u8, __m256i x_s8) { return vnni256::dpbusd(acc, w_u8, x_s8); }
#else
inline __m256i add_scaled(__m256i acc, __m256i pairs, __m256i scales16) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, scales16));
}
inline __m256i add_products(__m256i acc, __m256i w_u8, __m256i x_s8) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w_u8, x_s8), _mm256_set1_epi16(1)));
}
#endif

}  // namespace ggl::GGL_ISA::kquant
#endif
