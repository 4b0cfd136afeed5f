// The i-quant weight types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) as 32-value
// sub-blocks of 16-bit integers for the 16-bit integer GEMM, as kquant_unpack.h's Kinds (same
// interface, same callers): value = d * w per sub-block, d a float, w an integer. Each sub-block's
// grid points are gathered as bytes (bytes_of_u64) with a bit per value for its sign (IqSubBlock);
// here the signs are applied (negate_where_bits) and the bytes widened to int16, written once over the
// byte operations of kquant_bits.h for every architecture (the x86 8-bit rows take the same
// sub-blocks: arch/x86/iquant_blocks.h):
//   IQ2_XXS: d = d * (2 ls + 1) / 8,  w = level * sign (levels 8, 25, 43);
//   IQ2_XS, IQ2_S: d = d / 8,  w = level * sign * (2 ls + 1) with ls per 16 values;
//   IQ3_XXS: d = d * (2 ls + 1) / 4, w = level * sign (levels 4 .. 62);
//   IQ3_S:   d = d * (2 ls + 1),     w = level * sign (levels 1 .. 15);
//   IQ1_S:   d = d * (2 ls + 1) / 8, w = 8 * coordinate + shift (coordinates -1, 0, 1; shift +-1);
//   IQ1_M:   d = d / 8,  w = (8 * coordinate + shift) * (2 ls + 1) with ls per 16 values.
// (The reference's (0.5 + ls) / 4 is (2 ls + 1) / 8.) |w| <= 43 * 31 = 1333, within the 4096 the
// 16-bit panels' overflow bound allows (kquant_unpack.h).
#pragma once
#include "ggml-like/cpu/arch/kquant_unpack.h"
#if GGL_INT16_UNPACK
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ggml-like/quant/iq1.h"
#include "ggml-like/quant/iq2.h"
#include "ggml-like/quant/iq3.h"
#include "ggml-like/quant/iq_grids.h"
#include "ggml-like/cpu/iq_tables.h"

namespace ggl::GGL_ISA::unpack16 {

namespace iq {

using kquant::Bytes;
using kquant::f16;

// Four 8-value grid points, in order.
inline Bytes points8(const uint64_t* grid, uint32_t p0, uint32_t p1, uint32_t p2, uint32_t p3) {
  return kquant::bytes_of_u64(grid[p0], grid[p1], grid[p2], grid[p3]);
}
// Eight 4-value IQ3 points, in order.
inline Bytes points4(const uint32_t* grid, const uint32_t (&p)[8]) {
  auto two = [&](int k) { return grid[p[2 * k]] | static_cast<uint64_t>(grid[p[2 * k + 1]]) << 32; };
  return kquant::bytes_of_u64(two(0), two(1), two(2), two(3));
}
inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
// 2 ls + 1 in both int16 halves (an IqSubBlock scale).
inline uint32_t odd_pair(uint32_t ls) { return (2 * ls + 1) * 0x10001; }

// The signs stored as 7-bit fields (iq_even_signs: the eighth sign makes the count of negative
// values even) are decoded for a whole block at once, in GCC's portable vectors (the same code for
// every architecture): a field in the low 7 bits of each byte gets its parity as bit 7.
using U32x8 = uint32_t __attribute__((vector_size(32)));
using U16x16 = uint16_t __attribute__((vector_size(32)));
using U8x16 = uint8_t __attribute__((vector_size(16)));
template <class V>
[[gnu::always_inline]] inline V with_parity(V v) {
  using Lane = std::remove_cvref_t<decltype(v[0])>;
  constexpr auto kOnes = static_cast<Lane>(0x0101010101010101ULL);
  V p = v ^ (v >> 4);  // bit 0 of each byte ends as the XOR of its 8 bits
  p ^= p >> 2;
  p ^= p >> 1;
  return v | ((p & kOnes) << 7);
}
template <class V>
inline V load_vector(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A block's 8 sub-blocks' sign bits (bit e of negative[s]: value e of sub-block s is negative)
// and, for the types that keep them beside the signs, their scales 2 ls + 1 (in both int16 halves
// of scale[s], as the 8-bit rows broadcast them).
struct BlockSigns {
  alignas(32) uint32_t negative[8];
  alignas(32) uint32_t scale[8];
};
// Stores the vectors and makes the compiler read them back from memory: left in registers, GCC
// takes each sub-block's word out with lane shuffles, which measured 1.2x slower than a
// broadcast load per sub-block (docs/cpu-speed.md, "i-quant decode rows").
using U32x8Alias = U32x8 __attribute__((may_alias));
[[gnu::always_inline]] inline void store_for_loads(BlockSigns& out, U32x8 negative, U32x8 scale) {
  *reinterpret_cast<U32x8Alias*>(out.negative) = negative;
  *reinterpret_cast<U32x8Alias*>(out.scale) = scale;
  asm("" : "+m"(out));
}
// From 8 words of four 7-bit fields and a 4-bit ls on top (IQ2_XXS, IQ3_XXS).
[[gnu::always_inline]] inline BlockSigns signs_of_words(U32x8 w) {
  const U32x8 fields = (w & 0x7F) | ((w << 1) & 0x7F00) | ((w << 2) & 0x7F0000) | ((w << 3) & 0x7F000000);
  BlockSigns out;
  store_for_loads(out, with_parity(fields), ((w >> 28) * 2 + 1) * 0x10001);
  return out;
}
// From 32 16-bit grid words with a 7-bit field on top (IQ2_XS: 9-bit index, 7 signs).
[[gnu::always_inline]] inline BlockSigns signs_of_halfwords(const uint16_t* q) {
  const U8x16 lo = __builtin_convertvector(with_parity(load_vector<U16x16>(q) >> 9), U8x16);
  const U8x16 hi = __builtin_convertvector(with_parity(load_vector<U16x16>(q + 16) >> 9), U8x16);
  BlockSigns out;
  store_for_loads(
      out,
      reinterpret_cast<U32x8>(__builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                                      17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31)),
      U32x8{});
  return out;
}

}  // namespace iq

// Sub-block s of an i-quant block: 32 bytes in element order, the values' magnitudes (levels,
// unsigned) with a bit per value set where it is negative, or, for the types with kSignedLevels
// (IQ1_S, IQ1_M, whose values are a shifted grid), the signed values themselves; the value is step
// * scale * (signed level), scale[0] for values 0..15 and scale[1] for 16..31 (equal where the
// type scales per 32 values; each in both int16 halves, as the 8-bit rows broadcast it), step
// the block's (Derived::step). step * scale is exact in float (an fp16 times at most 31 / 8), so
// step * scale * q rounds once, to the dequantizer's value: the float path decodes through it too
// (dot.cpp). The 8-bit rows (arch/x86/iquant_blocks.h) keep the
// magnitudes unsigned and move the signs onto the activations.
struct IqSubBlock {
  kquant::Bytes levels;
  uint32_t negative;
  uint32_t scale[2];
  int16_t scale16(int half) const { return static_cast<int16_t>(scale[half]); }
};

// A Kind (kquant_unpack.h) from Derived::step(block), Derived::signs(block) (what a block decodes
// once for all its sub-blocks: iq::BlockSigns, or nothing) and Derived::sub_block(block, signs, s).
template <class Derived, class WeightBlock, bool kPer16, bool kSigned = false>
struct IqKind : KindOf<WeightBlock, kSuperBlock, false> {
  static constexpr bool kScalePer16 = kPer16;
  static constexpr bool kSignedLevels = kSigned;
  struct NoSigns {};
  static NoSigns signs(const WeightBlock&) { return {}; }
  // The sub-block's 32 values as signed bytes.
  [[gnu::always_inline]] static kquant::Bytes values(const IqSubBlock& sub) {
    if constexpr (kSigned)
      return sub.levels;
    else
      return kquant::negate_where_bits(sub.levels, sub.negative);
  }
  template <class F>
  [[gnu::always_inline]] static void unpack(const WeightBlock& w, F&& f) {
    const float step = Derived::step(w);
    const auto signs = Derived::signs(w);
    // Unrolled: the rows path picks its accumulators by s, which must stay registers (left a
    // loop, GCC kept them on the stack: an IQ2_XXS decode step measured 1.4x slower).
#pragma GCC unroll 8
    for (int s = 0; s < kSuperBlock / kQuantBlock; ++s) {
      const IqSubBlock sub = Derived::sub_block(w, signs, s);
      if constexpr (kPer16)
        f(s, signed_per16(values(sub), sub.scale16(0), sub.scale16(1)), step, 0.0f);
      else
        f(s, SignedBytes{values(sub)}, step * static_cast<float>(sub.scale16(0)), 0.0f);
    }
  }
};

struct IQ2_XXS : IqKind<IQ2_XXS, BlockIQ2_XXS, false> {
  static float step(const Block& w) { return 0.125f * iq::f16(w.d); }
  // Sub-block s: 4 grid indices, then 4 sign fields and ls.
  [[gnu::always_inline]] static iq::BlockSigns signs(const Block& w) {
    return iq::signs_of_words(__builtin_shufflevector(
        iq::load_vector<iq::U32x8>(w.qs), iq::load_vector<iq::U32x8>(w.qs + 16), 1, 3, 5, 7, 9, 11, 13, 15));
  }
  [[gnu::always_inline]] static IqSubBlock sub_block(const Block& w, const iq::BlockSigns& signs, int s) {
    const auto* points = reinterpret_cast<const uint8_t*>(w.qs + 4 * s);
    return {iq::points8(kIq2xxsGrid.v, points[0], points[1], points[2], points[3]),
            signs.negative[s],
            {signs.scale[s], signs.scale[s]}};
  }
};

struct IQ2_XS : IqKind<IQ2_XS, BlockIQ2_XS, true> {
  static float step(const Block& w) { return 0.125f * iq::f16(w.d); }
  [[gnu::always_inline]] static iq::BlockSigns signs(const Block& w) { return iq::signs_of_halfwords(w.qs); }
  [[gnu::always_inline]] static IqSubBlock sub_block(const Block& w, const iq::BlockSigns& signs, int s) {
    const uint16_t* q = w.qs + 4 * s;
    return {iq::points8(kIq2xsGrid.v, q[0] & 511, q[1] & 511, q[2] & 511, q[3] & 511),
            signs.negative[s],
            {iq::odd_pair(w.scales[s] & 15), iq::odd_pair(w.scales[s] >> 4)}};
  }
};

struct IQ2_S : IqKind<IQ2_S, BlockIQ2_S, true> {
  static float step(const Block& w) { return 0.125f * iq::f16(w.d); }
  [[gnu::always_inline]] static IqSubBlock sub_block(const Block& w, NoSigns, int s) {
    const uint8_t* q = w.qs + 4 * s;
    const uint32_t high = w.qh[s];
    return {iq::points8(kIq2sGrid.v, q[0] | ((high << 8) & 0x300), q[1] | ((high << 6) & 0x300),
                        q[2] | ((high << 4) & 0x300), q[3] | ((high << 2) & 0x300)),
            iq::load_u32(w.qs + kSuperBlock / 8 + 4 * s),
            {iq::odd_pair(w.scales[s] & 15), iq::odd_pair(w.scales[s] >> 4)}};
  }
};

struct IQ3_XXS : IqKind<IQ3_XXS, BlockIQ3_XXS, false> {
  static float step(const Block& w) { return 0.25f * iq::f16(w.d); }
  // After the 64 grid indices, sub-block s's 4 sign fields and ls.
  [[gnu::always_inline]] static iq::BlockSigns signs(const Block& w) {
    return iq::signs_of_words(iq::load_vector<iq::U32x8>(w.qs + kSuperBlock / 4));
  }
  [[gnu::always_inline]] static IqSubBlock sub_block(const Block& w, const iq::BlockSigns& signs, int s) {
    const uint8_t* q = w.qs + 8 * s;
    const uint32_t p[8] = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]};
    return {iq::points4(iq_tables::kIq3XxsBytes.data(), p), signs.negative[s], {signs.scale[s], signs.scale[s]}};
  }
};

struct IQ3_S : IqKind<IQ3_S, BlockIQ3_S, false> {
  static float step(const Block& w) { return iq::f16(w.d); }
  [[gnu::always_inline]] static IqSubBlock sub_block(const Block& w, NoSigns, int s) {
    uint32_t p[8];
    for (int k = 0; k < 8; ++k) p[k] = static_cast<uint32_t>(quant::point_iq3_s(w, s, k));
    const uint32_t scale = iq::odd_pair((w.scales[s / 2] >> (4 * (s % 2))) & 15);
    return {iq::points4(iq_tables::kIq3SBytes.data(), p), iq::load_u32(w.signs + 4 * s), {scale, scale}};
  }
};

struct IQ1_S : IqKind<IQ1_S, BlockIQ1_S, false, true> {
  static float step(const Block& w) { return 0.125f * iq::f16(w.d); }
  [[gnu::always_inline]] static IqSubBlock sub_block(const Block& w, NoSigns, int s) {
    const uint8_t* q = w.qs + 4 * s;
    const uint32_t high = w.qh[s];
    const iq::Bytes levels =
        iq::points8(iq_tables::kIq1sGrid8.v, q[0] | ((high << 8) & 0x700), q[1] | ((high << 5) & 0x700),
                    q[2] | ((high << 2) & 0x700), q[3] | ((high >> 1) & 0x700));
    const uint32_t scale = iq::odd_pair((high >> 12) & 7);
    // All 32 values shift by -1/8 (bit 15), or none.
    return {kquant::bytes_sub(levels, static_cast<char>(2 * (high >> 15))), 0 /* signed levels */, {scale, scale}};
  }
};

struct IQ1_M : IqKind<IQ1_M, BlockIQ1_M, true, true> {
  static float step(const Block& w) { return 0.125f * iq::f16(quant::iq1_m_scale_bits(w)); }
  [[gnu::always_inline]] static IqSubBlock sub_block(const Block& w, NoSigns, int s) {
    const uint8_t* q = w.qs + 4 * s;
    const uint32_t h0 = w.qh[2 * s], h1 = w.qh[2 * s + 1];
    const iq::Bytes levels =
        iq::points8(iq_tables::kIq1sGrid8.v, q[0] | ((h0 << 8) & 0x700), q[1] | ((h0 << 4) & 0x700),
                    q[2] | ((h1 << 8) & 0x700), q[3] | ((h1 << 4) & 0x700));
    // Bit 3 of each group's nibble: its 8 values shift by -1/8.
    const uint32_t negative = ((0u - ((h0 >> 3) & 1)) & 0xFF) | ((0u - ((h0 >> 7) & 1)) & 0xFF00) |
                              ((0u - ((h1 >> 3) & 1)) & 0xFF0000) | ((0u - ((h1 >> 7) & 1)) & 0xFF000000);
    const uint32_t word = w.scales[2 * (s / 2)] | (w.scales[2 * (s / 2) + 1] << 8), shift = 6 * (s % 2);
    return {kquant::bytes_sub(levels, kquant::bits_to_bytes(negative, 2)),
            0 /* signed levels */,
            {iq::odd_pair((word >> shift) & 7), iq::odd_pair((word >> (shift + 3)) & 7)}};
  }
};

}  // namespace ggl::GGL_ISA::unpack16
#endif
