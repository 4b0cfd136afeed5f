// The i-quant weight types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) as 32-value
// sub-blocks of 16-bit integers for the 16-bit integer GEMM, as kquant_unpack.h's Kinds (same
// interface, same callers): value = d * w per sub-block, d a float, w an integer. Each sub-block's
// grid points are gathered as bytes (bytes_of_u64), their signs applied (negate_where) and the
// bytes widened to int16, written once over the byte operations of kquant_bits.h for every
// architecture:
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
#include <array>
#include <cstdint>
#include <cstring>

#include "ggml-like/quant/iq1.h"
#include "ggml-like/quant/iq2.h"
#include "ggml-like/quant/iq3.h"
#include "ggml-like/quant/iq_grids.h"

// The decode tables, derived at compile time from the grids (iq_grids.h, iq3_grids.h): the same
// for every kernel set, so outside the sets' namespaces.
namespace ggl::iq_tables {

// The signs of 8 values stored as 7 bits (iq_even_signs) as a byte mask, by the 7: byte j is 0xFF
// where value j is negative (one load per group of 8).
inline constexpr std::array<uint64_t, 128> kEvenSignMasks = [] {
  std::array<uint64_t, 128> t{};
  for (uint32_t i = 0; i < 128; ++i)
    for (int j = 0; j < 8; ++j)
      if ((iq_even_signs(i) >> j) & 1) t[i] |= uint64_t{0xFF} << (8 * j);
  return t;
}();

// An IQ3 grid's points as 4 bytes each, byte i the magnitude of coordinate i.
template <int N, class Value>
constexpr std::array<uint32_t, N> iq3_point_bytes(const uint16_t (&codes)[N], Value value) {
  std::array<uint32_t, N> t{};
  for (int p = 0; p < N; ++p)
    for (int i = 0; i < 4; ++i) t[p] |= static_cast<uint32_t>(value(iq3_level(codes[p], i))) << (8 * i);
  return t;
}
inline constexpr auto kIq3XxsBytes = iq3_point_bytes(kIq3XxsGrid, [](int l) { return iq3_xxs_value(l); });
inline constexpr auto kIq3SBytes = iq3_point_bytes(kIq3SGrid, [](int l) { return iq3_s_value(l); });

// IQ1's points with each coordinate c as the byte 8 c + 1 (-7, 1, 9): the value 8 (c + 1/8); a
// negative shift subtracts 2.
inline constexpr uint8_t kIq1Levels8[3] = {0xf9, 0x01, 0x09};
inline constexpr IqGrid<2048> kIq1sGrid8 = make_iq_grid(kIq1sPoints, kIq1Levels8);

}  // namespace ggl::iq_tables

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
// Bytes negated where bit e of `signs` is set (byte e).
inline Bytes with_signs(Bytes v, uint32_t signs) {
  return kquant::negate_where(v, kquant::bits_to_bytes(signs, static_cast<char>(0xFF)));
}
// Bytes negated by the signs of four groups of 8 stored as 7 bits each (s0..s3, iq_even_signs).
inline Bytes with_even_signs(Bytes v, uint32_t s0, uint32_t s1, uint32_t s2, uint32_t s3) {
  const auto& m = iq_tables::kEvenSignMasks;
  return kquant::negate_where(v, kquant::bytes_of_u64(m[s0 & 127], m[s1 & 127], m[s2 & 127], m[s3 & 127]));
}
// The same for the four 7-bit fields of `packed` (bits 7l..7l+6).
inline Bytes with_even_signs(Bytes v, uint32_t packed) {
  return with_even_signs(v, packed, packed >> 7, packed >> 14, packed >> 21);
}
inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline float odd(uint32_t ls) { return static_cast<float>(2 * ls + 1); }
inline int16_t odd16(uint32_t ls) { return static_cast<int16_t>(2 * ls + 1); }

}  // namespace iq

// Sub-block s of an i-quant block: 32 signed bytes q in element order, value d * scale * q with
// scale[0] for values 0..15 and scale[1] for 16..31 (both 1 where the type scales per 32 values:
// folded into d). d * scale is exact in float (an fp16 times at most 31 / 8), so d * scale * q
// rounds once, to the dequantizer's value: the float path decodes through it too (dot.cpp).
struct IqSubBlock {
  kquant::Bytes q;
  float d;
  int16_t scale[2] = {1, 1};
};

// A Kind (kquant_unpack.h) from Derived::sub_block(block, s).
template <class Derived, class WeightBlock, bool kPer16>
struct IqKind : KindOf<WeightBlock, kSuperBlock, false> {
  static constexpr bool kScalePer16 = kPer16;
  template <class F>
  [[gnu::always_inline]] static void unpack(const WeightBlock& w, F&& f) {
    // Unrolled: the rows path picks its accumulators by s, which must stay registers (left a
    // loop, GCC kept them on the stack: an IQ2_XXS decode step measured 1.4x slower).
#pragma GCC unroll 8
    for (int s = 0; s < kSuperBlock / kQuantBlock; ++s) {
      const IqSubBlock sub = Derived::sub_block(w, s);
      if constexpr (kPer16)
        f(s, signed_per16(sub.q, sub.scale[0], sub.scale[1]), sub.d, 0.0f);
      else
        f(s, widen_signed(sub.q), sub.d, 0.0f);
    }
  }
};

struct IQ2_XXS : IqKind<IQ2_XXS, BlockIQ2_XXS, false> {
  [[gnu::always_inline]] static IqSubBlock sub_block(const Block& w, int s) {
    const uint32_t points = iq::load_u32(w.qs + 4 * s), signs = iq::load_u32(w.qs + 4 * s + 2);
    const iq::Bytes levels =
        iq::points8(kIq2xxsGrid.v, points & 255, (points >> 8) & 255, (points >> 16) & 255, points >> 24);
    return {iq::with_even_signs(levels, signs), 0.125f * iq::f16(w.d) * iq::odd(signs >> 28)};
  }
};

struct IQ2_XS : IqKind<IQ2_XS, BlockIQ2_XS, true> {
  [[gnu::always_inline]] static IqSubBlock sub_block(const Block& w, int s) {
    const uint16_t* q = w.qs + 4 * s;
    const iq::Bytes levels = iq::points8(kIq2xsGrid.v, q[0] & 511, q[1] & 511, q[2] & 511, q[3] & 511);
    return {iq::with_even_signs(levels, q[0] >> 9, q[1] >> 9, q[2] >> 9, q[3] >> 9),
            0.125f * iq::f16(w.d),
            {iq::odd16(w.scales[s] & 15), iq::odd16(w.scales[s] >> 4)}};
  }
};

struct IQ2_S : IqKind<IQ2_S, BlockIQ2_S, true> {
  [[gnu::always_inline]] static IqSubBlock sub_block(const Block& w, int s) {
    const uint8_t* q = w.qs + 4 * s;
    const uint32_t high = w.qh[s];
    const iq::Bytes levels = iq::points8(kIq2sGrid.v, q[0] | ((high << 8) & 0x300), q[1] | ((high << 6) & 0x300),
                                         q[2] | ((high << 4) & 0x300), q[3] | ((high << 2) & 0x300));
    return {iq::with_signs(levels, iq::load_u32(w.qs + kSuperBlock / 8 + 4 * s)),
            0.125f * iq::f16(w.d),
            {iq::odd16(w.scales[s] & 15), iq::odd16(w.scales[s] >> 4)}};
  }
};

struct IQ3_XXS : IqKind<IQ3_XXS, BlockIQ3_XXS, false> {
  [[gnu::always_inline]] static IqSubBlock sub_block(const Block& w, int s) {
    const uint8_t* q = w.qs + 8 * s;
    const uint32_t p[8] = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]};
    const uint32_t word = quant::scale_signs_iq3_xxs(w, s);
    const iq::Bytes levels = iq::points4(iq_tables::kIq3XxsBytes.data(), p);
    return {iq::with_even_signs(levels, word), 0.25f * iq::f16(w.d) * iq::odd(word >> 28)};
  }
};

struct IQ3_S : IqKind<IQ3_S, BlockIQ3_S, false> {
  [[gnu::always_inline]] static IqSubBlock sub_block(const Block& w, int s) {
    uint32_t p[8];
    for (int k = 0; k < 8; ++k) p[k] = static_cast<uint32_t>(quant::point_iq3_s(w, s, k));
    const iq::Bytes levels = iq::points4(iq_tables::kIq3SBytes.data(), p);
    const uint32_t ls = (w.scales[s / 2] >> (4 * (s % 2))) & 15;
    return {iq::with_signs(levels, iq::load_u32(w.signs + 4 * s)), iq::f16(w.d) * iq::odd(ls)};
  }
};

struct IQ1_S : IqKind<IQ1_S, BlockIQ1_S, false> {
  [[gnu::always_inline]] static IqSubBlock sub_block(const Block& w, int s) {
    const uint8_t* q = w.qs + 4 * s;
    const uint32_t high = w.qh[s];
    const iq::Bytes levels =
        iq::points8(iq_tables::kIq1sGrid8.v, q[0] | ((high << 8) & 0x700), q[1] | ((high << 5) & 0x700),
                    q[2] | ((high << 2) & 0x700), q[3] | ((high >> 1) & 0x700));
    // All 32 values shift by -1/8 (bit 15), or none.
    return {kquant::bytes_sub(levels, static_cast<char>(2 * (high >> 15))),
            0.125f * iq::f16(w.d) * iq::odd((high >> 12) & 7)};
  }
};

struct IQ1_M : IqKind<IQ1_M, BlockIQ1_M, true> {
  [[gnu::always_inline]] static IqSubBlock sub_block(const Block& w, int s) {
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
            0.125f * iq::f16(quant::iq1_m_scale_bits(w)),
            {iq::odd16((word >> shift) & 7), iq::odd16((word >> (shift + 3)) & 7)}};
  }
};

}  // namespace ggl::GGL_ISA::unpack16
#endif
