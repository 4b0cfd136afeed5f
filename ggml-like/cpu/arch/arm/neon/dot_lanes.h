// The float32 dot products' per-set steps (cpu/simd/dot.cpp describes them) for both ARM sets
// (aarch64 Advanced SIMD): 4 lanes, so a 16-entry table is 64 bytes in four registers, which TBL
// looks up byte by byte.
#pragma once
#if defined(__ARM_NEON) && defined(__aarch64__)
#define GGL_DOT_LANES 1
#include <xsimd/xsimd.hpp>

#include <cstdint>
#include <cstring>

#include "ggml-like/cpu/arch/arm/arm_intrinsics.h"

namespace ggl::GGL_ISA::dot_lanes {

using Floats = xsimd::batch<float>;
using Ints = xsimd::batch<int32_t>;
static_assert(Floats::size == 4 && Ints::size == 4);

// Four bytes in the low lanes of a vector, through memcpy: they may be the last bytes of a buffer.
inline uint8x8_t load4(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return vreinterpret_u8_u32(vdup_n_u32(v));
}
inline Ints widen_u8(const uint8_t* p) {
  return Ints(vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(load4(p))))));
}
inline Ints widen_s8(const int8_t* p) { return Ints(vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u8(load4(p)))))); }
inline Ints widen_u16(const uint16_t* p) { return Ints(vreinterpretq_s32_u32(vmovl_u16(vld1_u16(p)))); }
inline Floats widen_f16(const uint16_t* p) { return Floats(vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)))); }
inline Floats broadcast_f16(uint16_t h) { return Floats(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h)))); }

struct Table16 {
  uint8x16x4_t bytes;
};
template <class Level>
inline Table16 table16(const float* entries, Level level) {
  Table16 t;
  for (int q = 0; q < 4; ++q)
    t.bytes.val[q] = vreinterpretq_u8_f32(static_cast<float32x4_t>(level(Floats::load_unaligned(entries + 4 * q))));
  return t;
}
// Lane i takes the bytes 4 (index & 15) .. + 3.
inline Floats lookup16(const Table16& table, Ints index) {
  const uint32x4_t first = vshlq_n_u32(vandq_u32(vreinterpretq_u32_s32(index), vdupq_n_u32(15)), 2);
  const uint32x4_t bytes = vmlaq_n_u32(vdupq_n_u32(0x03020100u), first, 0x01010101u);
  return Floats(vreinterpretq_f32_u8(vqtbl4q_u8(table.bytes, vreinterpretq_u8_u32(bytes))));
}

}  // namespace ggl::GGL_ISA::dot_lanes
#endif
