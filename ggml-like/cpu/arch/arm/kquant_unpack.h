// The NEON side of the K-quant / IQ4 / Q5 types' 16-bit unpacking (cpu/arch/kquant_unpack.h, whose
// Kinds are written once for every architecture), for both ARM sets: a sub-block's 32 weights
// widened to int16 as the rows path's PairRows::Weights (neon/gemm_steps.h), so that its SMLAL
// sums serve these types as they serve Q4_0, and the panels store them for the ZIP transposes.
// The counterpart of arch/x86/kquant_unpack.h. Included through arch/kquant_unpack.h only.
#pragma once
#include "ggml-like/cpu/arch/kquant_bits.h"
#include "ggml-like/cpu/simd/gemm_steps.h"
#if GGL_KQUANT_BYTES && GGL_INT_GEMM && defined(__aarch64__)
#define GGL_INT16_WEIGHTS 1
#include <cstdint>

namespace ggl::GGL_ISA::unpack16 {

using kquant::Bytes;
using Weights = gemm_steps::PairRows::Weights;

inline Weights widen_unsigned(Bytes b) {
  return {{vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(b.lo))), vreinterpretq_s16_u16(vmovl_high_u8(b.lo)),
           vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(b.hi))), vreinterpretq_s16_u16(vmovl_high_u8(b.hi))}};
}
inline Weights widen_signed(Bytes b) {
  const int8x16_t lo = vreinterpretq_s8_u8(b.lo), hi = vreinterpretq_s8_u8(b.hi);
  return {{vmovl_s8(vget_low_s8(lo)), vmovl_high_s8(lo), vmovl_s8(vget_low_s8(hi)), vmovl_high_s8(hi)}};
}

// (q - zero) * scale per 16 values: the types with a scale per 16 (Q3_K, Q6_K), q unsigned bytes.
inline Weights scaled_per16(Bytes q, int zero, int16_t scale_lo, int16_t scale_hi) {
  Weights w = widen_unsigned(q);
  const int16x8_t z = vdupq_n_s16(static_cast<int16_t>(zero));
  for (int i = 0; i < 4; ++i) w.v[i] = vmulq_n_s16(vsubq_s16(w.v[i], z), i < 2 ? scale_lo : scale_hi);
  return w;
}

// q * scale per 16 values, q signed bytes: the i-quants with a scale per 16 (IQ2_XS, IQ2_S, IQ1_M).
inline Weights signed_per16(Bytes q, int16_t scale_lo, int16_t scale_hi) {
  Weights w = widen_signed(q);
  for (int i = 0; i < 4; ++i) w.v[i] = vmulq_n_s16(w.v[i], i < 2 ? scale_lo : scale_hi);
  return w;
}

// Weights that fit unsigned bytes (Q4_K, Q5_K, Q5_1): on NEON they widen as the others (the
// rows path has no byte product for 16-bit activations here: their low bytes are unsigned).
struct UnsignedBytes {
  Bytes bytes;
  void store(int16_t* out) const { widen_unsigned(bytes).store(out); }
};

// Signed weights that fit bytes (the i-quants with a scale per 32 values): widened as the others.
struct SignedBytes {
  Bytes bytes;
  void store(int16_t* out) const { widen_signed(bytes).store(out); }
};

// 8 int32 lane sums of the 32 products of a sub-block's weights and its int16 activations q.
inline gemm_rows_arm::RowSums sums(const Weights& w, const int16_t* q, const int8_t* hi, const uint8_t* lo) {
  return gemm_steps::PairRows::sums(w, q, hi, lo);
}
inline gemm_rows_arm::RowSums sums(const UnsignedBytes& w, const int16_t* q, const int8_t* hi, const uint8_t* lo) {
  return sums(widen_unsigned(w.bytes), q, hi, lo);
}
inline gemm_rows_arm::RowSums sums(const SignedBytes& w, const int16_t* q, const int8_t* hi, const uint8_t* lo) {
  return sums(widen_signed(w.bytes), q, hi, lo);
}

// out[i] = v[i] * scale for 8 bytes v (Q4_K / Q5_K's 8 sub-block scales or mins at once).
inline void scaled_floats(const uint8_t* v, float scale, float* out) {
  const uint16x8_t wide = vmovl_u8(vld1_u8(v));
  vst1q_f32(out, vmulq_n_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(wide))), scale));
  vst1q_f32(out + 4, vmulq_n_f32(vcvtq_f32_u32(vmovl_high_u16(wide)), scale));
}

}  // namespace ggl::GGL_ISA::unpack16
#endif
