// The i-quants' 8-bit products on the rows path (gemm_kquant.cpp's kInt8KGemm: the routed experts
// of a decode step), with Q8_K activations as the reference engine's dot products take them. Each
// 32-value sub-block comes from the same decoding as the 16-bit path's (arch/iquant_unpack.h):
// the grid magnitudes stay unsigned bytes, and the weights' signs move onto the activation bytes
// (negate_where_bits: exact, Q8_K keeps its quants within +-127), so one VPMADDUBSW multiplies
// them with no widening; IQ1_S / IQ1_M, whose values are signed (a shifted grid), go through
// pair_sums_signed. The 16 pair sums take the sub-block's integer scales into 8 int32 lanes, and
// a super-block ends in one conversion to float (step * the column's d). Bounds: a pair sum is at
// most 2 * 62 * 127 (IQ3_XXS's largest level), a lane after 8 sub-blocks at most
// 8 * 2 * 15748 * 31: no saturation, no wrap-around.
#pragma once
#include "ggml-like/cpu/arch/iquant_unpack.h"
#include "ggml-like/cpu/arch/x86/kquant_blocks.h"
#if GGL_KQUANT_GEMM && GGL_INT16_UNPACK
#include <cstdint>

namespace ggl::GGL_ISA::kquant {

// acc + sub-block `sub` of an i-quant Kind of arch/iquant_unpack.h (unpack16::IQ2_XXS, ...) times
// 32 activation bytes, in 8 int32 lanes, the sub-block's scales applied.
template <class Iq>
[[gnu::always_inline]] inline __m256i add_iquant_sums(__m256i acc, const unpack16::IqSubBlock& sub, __m256i x) {
  const __m256i pairs =
      Iq::kSignedLevels ? pair_sums_signed(sub.levels, x) : pair_sums(sub.levels, negate_where_bits(x, sub.negative));
  // Per 32 values, the scale pair as one 32-bit broadcast (from memory where the Kind stored it).
  const __m256i scale =
      Iq::kScalePer16 ? scale_pair(sub.scale16(0), sub.scale16(1)) : _mm256_set1_epi32(static_cast<int>(sub.scale[0]));
  return add_scaled(acc, pairs, scale);
}

template <class Iq>
struct KindIquant {
  using Block = typename Iq::Block;
  using Column = Q8KColumn;
  static constexpr int64_t kValues = kSuperBlock;
  template <int C>
  static void add(const Block& w, const Column* x, int64_t b, __m256* acc) {
    __m256i isum[C];
    for (auto& s : isum) s = _mm256_setzero_si256();
    const auto signs = Iq::signs(w);
#pragma GCC unroll 8
    for (int s = 0; s < kSuperBlock / kQuantBlock; ++s) {
      const unpack16::IqSubBlock sub = Iq::sub_block(w, signs, s);
      for (int c = 0; c < C; ++c) isum[c] = add_iquant_sums<Iq>(isum[c], sub, load32(x[c][b].qs + kQuantBlock * s));
    }
    const float step = Iq::step(w);
    for (int c = 0; c < C; ++c) acc[c] = finish(acc[c], step, x[c][b], isum[c]);
  }
};

}  // namespace ggl::GGL_ISA::kquant
#endif
