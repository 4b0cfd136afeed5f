// The float side of the integer GEMMs' rows path (cpu/simd/gemm_rows.h) on ARM, the counterpart
// of arch/x86/gemm_rows_x86.h. The walk ends a block's products in 8 int32 lane sums (it spreads a
// block's zero point and min over 8 lanes, an eighth each), so a row's lanes here are two NEON
// vectors of 4: RowSums for the integer sums, RowF for their floats. Included by the NEON sets'
// gemm_steps.h.
#pragma once
#include <cstdint>
#include <cstring>

#include "ggml-like/cpu/arch/arm/arm_intrinsics.h"

namespace ggl::GGL_ISA::gemm_rows_arm {

struct RowSums {  // 8 int32 lane sums of a block's products
  int32x4_t lo, hi;
};
struct RowF {  // 8 float lane sums of a row's products
  float32x4_t lo, hi;
};
inline constexpr int kRowLanes = 8;

inline RowF rzero() { return {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}; }
inline RowF rset1(float v) { return {vdupq_n_f32(v), vdupq_n_f32(v)}; }
// a * b + c and a * b - c, each rounded once (as x86's FMA forms).
inline RowF rfmadd(RowF a, RowF b, RowF c) { return {vfmaq_f32(c.lo, a.lo, b.lo), vfmaq_f32(c.hi, a.hi, b.hi)}; }
inline RowF rfmsub(RowF a, RowF b, RowF c) {
  return {vfmaq_f32(vnegq_f32(c.lo), a.lo, b.lo), vfmaq_f32(vnegq_f32(c.hi), a.hi, b.hi)};
}
inline RowF rto_float(RowSums v) { return {vcvtq_f32_s32(v.lo), vcvtq_f32_s32(v.hi)}; }
inline RowF rmul(RowF a, RowF b) { return {vmulq_f32(a.lo, b.lo), vmulq_f32(a.hi, b.hi)}; }
inline RowF radd(RowF a, RowF b) { return {vaddq_f32(a.lo, b.lo), vaddq_f32(a.hi, b.hi)}; }
inline RowF rload(const float* p) { return {vld1q_f32(p), vld1q_f32(p + 4)}; }  // 8 floats

// The fp16 at p as a float in every lane.
inline RowF broadcast_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  const float32x4_t v = vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h)));
  return {v, v};
}

inline float sum_lanes(RowF v) { return vaddvq_f32(vaddq_f32(v.lo, v.hi)); }

}  // namespace ggl::GGL_ISA::gemm_rows_arm
