// The byte operations the K-quant / IQ4 / Q5 bit layouts (cpu/arch/kquant_bits.h) are written
// over, on NEON (both ARM sets): 32 bytes in element order as two 128-bit vectors, the
// counterpart of arch/x86/kquant_bytes.h. Included through kquant_bits.h only.
#pragma once
#include "ggml-like/cpu/arch/arm/arm_intrinsics.h"
#if defined(__ARM_NEON) && defined(__aarch64__)
#define GGL_KQUANT_BYTES 1
#include <cstdint>
#include <cstring>

#include "ggml-like/quant/iq4.h"

namespace ggl::GGL_ISA::kquant {

struct Bytes {  // elements 0..15 in lo, 16..31 in hi
  uint8x16_t lo, hi;
};

inline float f16(uint16_t h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }
inline Bytes load32(const void* p) {
  const auto* b = static_cast<const uint8_t*>(p);
  return {vld1q_u8(b), vld1q_u8(b + 16)};
}
inline void store32(void* p, Bytes v) {
  auto* b = static_cast<uint8_t*>(p);
  vst1q_u8(b, v.lo);
  vst1q_u8(b + 16, v.hi);
}
inline Bytes mask8(Bytes v, uint8_t m) { return {vandq_u8(v.lo, vdupq_n_u8(m)), vandq_u8(v.hi, vdupq_n_u8(m))}; }
inline Bytes bytes_or(Bytes a, Bytes b) { return {vorrq_u8(a.lo, b.lo), vorrq_u8(a.hi, b.hi)}; }
inline Bytes bytes_sub(Bytes v, uint8_t k) { return {vsubq_u8(v.lo, vdupq_n_u8(k)), vsubq_u8(v.hi, vdupq_n_u8(k))}; }
inline Bytes bytes_sub(Bytes a, Bytes b) { return {vsubq_u8(a.lo, b.lo), vsubq_u8(a.hi, b.hi)}; }
inline Bytes negate_where(Bytes v, Bytes mask) {
  return {vsubq_u8(veorq_u8(v.lo, mask.lo), mask.lo), vsubq_u8(veorq_u8(v.hi, mask.hi), mask.hi)};
}
inline Bytes bytes_of_u64(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return {vcombine_u8(vcreate_u8(a), vcreate_u8(b)), vcombine_u8(vcreate_u8(c), vcreate_u8(d))};
}
// Shifts of each 16-bit lane by n bits (left for n > 0), as x86's (kquant_bits.h masks off what
// crosses between bytes); with n known at compile time the compiler takes the immediate forms.
inline Bytes shl16(Bytes v, int n) {
  const int16x8_t count = vdupq_n_s16(static_cast<int16_t>(n));
  return {vreinterpretq_u8_u16(vshlq_u16(vreinterpretq_u16_u8(v.lo), count)),
          vreinterpretq_u8_u16(vshlq_u16(vreinterpretq_u16_u8(v.hi), count))};
}
inline Bytes shr16(Bytes v, int n) { return shl16(v, -n); }

inline Bytes nibbles_of_16(const uint8_t* qs) {
  const uint8x16_t b = vld1q_u8(qs);
  return {vandq_u8(b, vdupq_n_u8(0x0F)), vshrq_n_u8(b, 4)};
}

inline Bytes bits_to_bytes(uint32_t bits, uint8_t value) {
  // Byte e of the result takes byte e / 8 of `bits` (a table lookup), then tests bit e % 8.
  static constexpr uint8_t kSpread[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
  static constexpr uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t source = vreinterpretq_u8_u32(vdupq_n_u32(bits)), bit = vld1q_u8(kBit);
  const uint8x16_t v = vdupq_n_u8(value);
  return {vandq_u8(vtstq_u8(vqtbl1q_u8(source, vld1q_u8(kSpread)), bit), v),
          vandq_u8(vtstq_u8(vqtbl1q_u8(source, vld1q_u8(kSpread + 16)), bit), v)};
}

// Bytes negated where bit e of `bits` is set (byte e).
inline Bytes negate_where_bits(Bytes v, uint32_t bits) { return negate_where(v, bits_to_bytes(bits, 0xFF)); }

inline Bytes iq4_lookup(Bytes nibbles) {
  const uint8x16_t table = vreinterpretq_u8_s8(vld1q_s8(kIq4Values));
  return {vqtbl1q_u8(table, nibbles.lo), vqtbl1q_u8(table, nibbles.hi)};
}

}  // namespace ggl::GGL_ISA::kquant
#endif
