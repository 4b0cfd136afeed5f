// The K-quant / IQ4 / Q5 weight types as 32-value sub-blocks of 16-bit integers, for the 16-bit
// integer GEMM (kInt16Gemm, cpu/simd/gemm_int16.cpp). Every one of these types is, per sub-block
// of 32 values, value_i = d * w_i + m with integer w_i and a float scale d and min m, which is the
// form the 16-bit panels and rows multiply (Q4_1's d and min):
//   Q4_K, Q5_K: d = d * sc_s, m = -dmin * m_s, w = q (0..15, 0..31);
//   Q6_K:       d = d, w = (q - 32) * scale (the scale per 16 values folded into the weight);
//   Q3_K:       d = d, w = (q - 4) * scale (likewise);
//   IQ4_XS:     d = d * (ls - 32), w = the level;  IQ4_NL: d = d, w = the level;
//   Q5_0:       d = d, w = q - 16;  Q5_1: d = d, m = m, w = q.
//   Q2_K:       d = d, w = q * (scale & 15) (q 0..3), and its two mins per 32 (one per 16 values,
//               -dmin * (scale >> 4)) as m = their mean plus a skew = half their difference that
//               adds on the first 16 values and subtracts on the last 16 (kHasSkew, skews()).
// Each type's unpacking is written once, here and in the bit layouts (kquant_bits.h), for every
// architecture, and serves both paths: the rows path keeps a sub-block in registers
// (gemm_rows.h), the panel packing stores it and transposes lane groups of rows (gemm_panel.h).
// What differs by architecture (its kquant_unpack.h: arch/x86/ for the avx2, avx2vnni and avx512
// sets, arch/arm/ for neon and neon_dotprod) is the weights' vector type, their widening and
// scaling to int16 and the multiply by a column (sums).
//
// Overflow: |w| <= 4096 (Q6_K: |scale| <= 128 times |q - 32| <= 32; Q3_K 32 * 4 = 128; IQ4 127;
// the others 31) and the activations are quantized to at most 16383 levels each side of zero, so
// a panel's int32 sum over a sub-block's 32 products stays within 32 * 4096 * 16383 = 2147352576
// < 2^31 (the rows path sums only 4 per lane); with 32767 levels Q6_K could wrap around.
//
// Each Kind has Block (the weight block), kValues (values per block), kHasMin, kHasSkew (then also
// skews(block, out): each sub-block's skew), and
// unpack(block, f), which calls f(s, weights, d, m) for every sub-block s of the block in order
// (weights: Weights, UnsignedBytes or SignedBytes, each with store() and sums())
// (inlined by force: left a call, the rows path's accumulators went through memory).
#pragma once
#if defined(__aarch64__)
#include "ggml-like/cpu/arch/arm/kquant_unpack.h"
#else
#include "ggml-like/cpu/arch/x86/kquant_unpack.h"
#endif
#if GGL_INT16_WEIGHTS
#define GGL_INT16_UNPACK 1
#include <cstdint>
#include <type_traits>

#include "ggml-like/core/types.h"
#include "ggml-like/quant/iq4.h"
#include "ggml-like/quant/kquants.h"
#include "ggml-like/quant/legacy.h"

namespace ggl::GGL_ISA::unpack16 {

using kquant::f16;
using kquant::iq4_levels;

// What every Kind declares: its weight block, values per block, and whether its values have a
// min (and a skew).
template <class WeightBlock, int64_t kValuesPerBlock, bool kMin, bool kSkew = false>
struct KindOf {
  using Block = WeightBlock;
  static constexpr int64_t kValues = kValuesPerBlock;
  static constexpr bool kHasMin = kMin;
  static constexpr bool kHasSkew = kSkew;
};

// Q4_K / Q5_K: 8 sub-blocks, value d * sc * q - dmin * m.
template <bool kFifthBit>
struct Q45_K : KindOf<std::conditional_t<kFifthBit, BlockQ5_K, BlockQ4_K>, kSuperBlock, true> {
  using Block = typename Q45_K::KindOf::Block;  // from a dependent base: named again
  template <class F>
  [[gnu::always_inline]] static void unpack(const Block& w, F&& f) {
    alignas(8) uint8_t sc[8], m[8];
    kquant::scales_mins_k4(w.scales, sc, m);
    // The 8 sub-blocks' d * sc and -dmin * m at once (scalar conversions measured in decode).
    alignas(32) float ds[8], ms[8];
    scaled_floats(sc, f16(w.d), ds);
    scaled_floats(m, -f16(w.dmin), ms);
    kquant::Bytes fifth;
    if constexpr (kFifthBit) fifth = kquant::load32(w.qh);
    for (int g = 0; g < 4; ++g) {
      kquant::Bytes q[2];
      kquant::q45_k_pair<Block, kFifthBit>(w, g, fifth, q);
      for (int h = 0; h < 2; ++h) {
        const int s = 2 * g + h;
        f(s, UnsignedBytes{q[h]}, ds[s], ms[s]);
      }
    }
  }
};

// Q6_K: value d * scale * (q - 32), q 0..63 (layout in kquants.h).
struct Q6_K : KindOf<BlockQ6_K, kSuperBlock, false> {
  template <class F>
  [[gnu::always_inline]] static void unpack(const Block& w, F&& f) {
    const float d = f16(w.d);
    for (int h = 0; h < 2; ++h) {
      kquant::Bytes q[4];
      kquant::q6_k_half(w, h, q);
      for (int k = 0; k < 4; ++k) {
        const int s = 4 * h + k;
        f(s, scaled_per16(q[k], 32, w.scales[2 * s], w.scales[2 * s + 1]), d, 0.0f);
      }
    }
  }
};

// Q3_K: value d * scale * (q - 4), q 0..7: two bits as Q2_K's plus a third from hmask. (Its loop
// is Q6_K's: a helper taking both measured different x86 code for the rows path, so both stay.)
struct Q3_K : KindOf<BlockQ3_K, kSuperBlock, false> {
  template <class F>
  [[gnu::always_inline]] static void unpack(const Block& w, F&& f) {
    int16_t scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = static_cast<int16_t>(quant::scale_q3_k(j, w.scales));
    const float d = f16(w.d);
    for (int h = 0; h < 2; ++h) {
      kquant::Bytes q[4];
      kquant::q3_k_half(w, h, q);
      for (int k = 0; k < 4; ++k) {
        const int s = 4 * h + k;
        f(s, scaled_per16(q[k], 4, scales[2 * s], scales[2 * s + 1]), d, 0.0f);
      }
    }
  }
};

// Q2_K: value d * (scale & 15) * q - dmin * (scale >> 4) per 16 values, q 0..3 in bits 2k..2k+1
// of qs[32 h + l] for element 128 h + 32 k + l; sub-block 4 h + k takes scales 2s and 2s + 1.
struct Q2_K : KindOf<BlockQ2_K, kSuperBlock, true, true> {
  template <class F>
  [[gnu::always_inline]] static void unpack(const Block& w, F&& f) {
    const float d = f16(w.d), half_dmin = 0.5f * f16(w.dmin);
    for (int h = 0; h < 2; ++h) {
      kquant::Bytes q[4];
      kquant::unpack_2bit_half(w.qs, h, q);
      for (int k = 0; k < 4; ++k) {
        const int s = 4 * h + k;
        const int first = w.scales[2 * s], second = w.scales[2 * s + 1];
        f(s, scaled_per16(q[k], 0, static_cast<int16_t>(first & 15), static_cast<int16_t>(second & 15)), d,
          -half_dmin * static_cast<float>((first >> 4) + (second >> 4)));
      }
    }
  }
  static void skews(const Block& w, float* out) {
    const float half_dmin = 0.5f * f16(w.dmin);
    for (int s = 0; s < 8; ++s)
      out[s] = -half_dmin * static_cast<float>((w.scales[2 * s] >> 4) - (w.scales[2 * s + 1] >> 4));
  }
};

// IQ4_XS: value d * (ls - 32) * level, 8 sub-blocks each ordered as an IQ4_NL block.
struct IQ4_XS : KindOf<BlockIQ4_XS, kSuperBlock, false> {
  template <class F>
  [[gnu::always_inline]] static void unpack(const Block& w, F&& f) {
    const float d = f16(w.d);
    for (int s = 0; s < 8; ++s)
      f(s, widen_signed(iq4_levels(w.qs + 16 * s)), d * static_cast<float>(quant::scale_iq4_xs(w, s)), 0.0f);
  }
};

// IQ4_NL: value d * level.
struct IQ4_NL : KindOf<BlockIQ4_NL, kQuantBlock, false> {
  template <class F>
  [[gnu::always_inline]] static void unpack(const Block& w, F&& f) {
    f(0, widen_signed(iq4_levels(w.qs)), f16(w.d), 0.0f);
  }
};

// Q5_0 (value d * (q - 16)) and Q5_1 (value d * q + m), q 0..31: Q4_0's nibbles plus qh's bits.
template <bool kMin>
struct Q5 : KindOf<std::conditional_t<kMin, BlockQ5_1, BlockQ5_0>, kQuantBlock, kMin> {
  using Block = typename Q5::KindOf::Block;  // from a dependent base: named again
  template <class F>
  [[gnu::always_inline]] static void unpack(const Block& w, F&& f) {
    const kquant::Bytes q = kquant::q5_quants(w);
    if constexpr (kMin)
      f(0, UnsignedBytes{q}, f16(w.d), f16(w.m));
    else
      f(0, widen_signed(kquant::bytes_sub(q, 16)), f16(w.d), 0.0f);
  }
};

}  // namespace ggl::GGL_ISA::unpack16
#endif
