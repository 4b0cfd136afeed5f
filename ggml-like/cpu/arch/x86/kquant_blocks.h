// One block of a K-quant / IQ4 / Q5 weight row times the same block of C quantized activation
// columns, on integers: the block's quants are unpacked to bytes once (32 at a time) and reused by
// every column, the multiply-add step (kquant_madd.h, the only per-instruction-set part) applies
// the sub-block scales, and the block's float scales apply once per block and column. Each
// column's result accumulates in 8 float lanes, summed once per row by the caller.
//
// Activations, as the reference engine's integer dot products take them:
//   super-block types (Q2_K..Q6_K, IQ4_XS): Q8_K blocks (float d, int8 q[256], int16 sums of each
//     16 q), so a sub-block's min or zero point comes off through those sums;
//   32-value types (Q5_0, Q5_1, IQ4_NL): Q8_0 quants with a float step d per 32 and the sum of the
//     block's quants, for the zero point (Q5_0, in integers) or the min (Q5_1).
// Each Kind has Block (the weight block), kValues (its values), Column (a view of one activation column) and
// add<C>(block, columns, b, acc): acc[c] += block b of the row times block b of column c.
#pragma once
#include "ggml-like/cpu/arch/kquant_bits.h"
#include "ggml-like/cpu/arch/x86/kquant_madd.h"
#if GGL_KQUANT_GEMM
#include <cstdint>
#include <type_traits>

#include "ggml-like/quant/iq4.h"
#include "ggml-like/quant/kquants.h"
#include "ggml-like/quant/legacy.h"

namespace ggl::GGL_ISA::kquant {

// ---- Helpers (the byte operations and the bit layouts: kquant_bytes.h, ../kquant_bits.h) ----

// Int16 lanes [a x 8 | b x 8]: the scales of a 32-value chunk whose two halves have their own.
inline __m256i scale_pair(int16_t a, int16_t b) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(a)), _mm_set1_epi16(b), 1);
}

inline __m256 to_float(__m256i v) { return _mm256_cvtepi32_ps(v); }

// ---- Super-block types, Q8_K activations ----

using Q8KColumn = const BlockQ8_K*;

// The float end of a super-block: acc + d * x.d * isum (minus dmin * x.d * msum, for the mins).
inline __m256 finish(__m256 acc, float d, const BlockQ8_K& x, __m256i isum) {
  return _mm256_fmadd_ps(_mm256_set1_ps(d * x.d), to_float(isum), acc);
}
inline __m256 finish(__m256 acc, float d, float dmin, const BlockQ8_K& x, __m256i isum, __m256i msum) {
  return _mm256_fnmadd_ps(_mm256_set1_ps(dmin * x.d), to_float(msum), finish(acc, d, x, isum));
}

// Sub-block sums of a column's quants against int16 weights per 16 values (a scale, a min or a
// zero point per 16): the part of a product that the sums stand in for.
inline __m256i sums_times(const BlockQ8_K& x, __m256i per16) { return _mm256_madd_epi16(load32(x.bsums), per16); }

// Q4_K / Q5_K: 8 sub-blocks of 32, quants 0..15 (0..31), value d * sc * q - dmin * m.
template <bool kFifthBit>
struct KindQ4Q5_K {
  using Block = std::conditional_t<kFifthBit, BlockQ5_K, BlockQ4_K>;
  using Column = Q8KColumn;
  static constexpr int64_t kValues = kSuperBlock;
  template <int C>
  static void add(const Block& w, const Column* x, int64_t b, __m256* acc) {
    alignas(8) uint8_t sc[8], m[8];
    scales_mins_k4(w.scales, sc, m);
    const __m128i m8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(m));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));  // each sub-block's min twice
    __m256i fifth;
    if constexpr (kFifthBit) fifth = load32(w.qh);
    __m256i isum[C];
    for (auto& s : isum) s = _mm256_setzero_si256();
    for (int g = 0; g < 4; ++g) {
      __m256i q[2];
      q45_k_pair<Block, kFifthBit>(w, g, fifth, q);
      for (int h = 0; h < 2; ++h) {
        const __m256i scale = _mm256_set1_epi16(sc[2 * g + h]);
        for (int c = 0; c < C; ++c)
          isum[c] = add_scaled(isum[c], pair_sums(q[h], load32(x[c][b].qs + 64 * g + 32 * h)), scale);
      }
    }
    const float d = f16(w.d), dmin = f16(w.dmin);
    for (int c = 0; c < C; ++c) acc[c] = finish(acc[c], d, dmin, x[c][b], isum[c], sums_times(x[c][b], mins));
  }
};
using KindQ4_K = KindQ4Q5_K<false>;
using KindQ5_K = KindQ4Q5_K<true>;

// The types with a scale per 16 values (Q2_K, Q3_K, Q6_K): the super-block is two halves of 128,
// each four chunks of 32 values whose quants Unpack yields, chunk k of the super-block taking
// scales[2k], scales[2k + 1]. isum = sum of scale * q * x; the zero point or mins come off through
// the sums.
template <class Unpack, int C>
void add_scaled_per16(const Unpack& unpack, const int16_t* scales, const Q8KColumn* x, int64_t b, __m256i* isum) {
  for (int c = 0; c < C; ++c) isum[c] = _mm256_setzero_si256();
  for (int h = 0; h < 2; ++h) {
    __m256i q[4];
    unpack(h, q);
    for (int k = 0; k < 4; ++k) {
      const int chunk = 4 * h + k;
      const __m256i scale = scale_pair(scales[2 * chunk], scales[2 * chunk + 1]);
      for (int c = 0; c < C; ++c)
        isum[c] = add_scaled(isum[c], pair_sums(q[k], load32(x[c][b].qs + 32 * chunk)), scale);
    }
  }
}

// A type with a scale per 16 and a zero point 2^kZeroShift (Q6_K: 32, Q3_K: 4): value
// d * scale * (q - zero point), the zero point's part scale * zero point * sum off the integers.
template <int kZeroShift, class Unpack, int C>
void add_with_zero_point(const Unpack& unpack, const int16_t* scales, __m256i scales16, float d, const Q8KColumn* x,
                         int64_t b, __m256* acc) {
  __m256i isum[C];
  add_scaled_per16<Unpack, C>(unpack, scales, x, b, isum);
  for (int c = 0; c < C; ++c) {
    const __m256i zero_point = _mm256_slli_epi32(sums_times(x[c][b], scales16), kZeroShift);
    acc[c] = finish(acc[c], d, x[c][b], _mm256_sub_epi32(isum[c], zero_point));
  }
}

// Q6_K: value d * scale * (q - 32), q 0..63 (layout in kquants.h).
struct KindQ6_K {
  using Block = BlockQ6_K;
  using Column = Q8KColumn;
  static constexpr int64_t kValues = kSuperBlock;
  template <int C>
  static void add(const Block& w, const Column* x, int64_t b, __m256* acc) {
    const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales)));
    alignas(32) int16_t scales[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(scales), scales16);
    auto unpack = [&](int h, __m256i* q) { q6_k_half(w, h, q); };
    add_with_zero_point<5, decltype(unpack), C>(unpack, scales, scales16, f16(w.d), x, b, acc);
  }
};

// Q3_K: value d * scale * (q - 4), q 0..7: Q2_K's two bits plus a third from hmask.
struct KindQ3_K {
  using Block = BlockQ3_K;
  using Column = Q8KColumn;
  static constexpr int64_t kValues = kSuperBlock;
  template <int C>
  static void add(const Block& w, const Column* x, int64_t b, __m256* acc) {
    alignas(32) int16_t scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = static_cast<int16_t>(quant::scale_q3_k(j, w.scales));
    const __m256i scales16 = _mm256_load_si256(reinterpret_cast<const __m256i*>(scales));
    auto unpack = [&](int h, __m256i* q) { q3_k_half(w, h, q); };
    add_with_zero_point<2, decltype(unpack), C>(unpack, scales, scales16, f16(w.d), x, b, acc);
  }
};

// Q2_K: value d * (scales & 15) * q - dmin * (scales >> 4), q 0..3.
struct KindQ2_K {
  using Block = BlockQ2_K;
  using Column = Q8KColumn;
  static constexpr int64_t kValues = kSuperBlock;
  template <int C>
  static void add(const Block& w, const Column* x, int64_t b, __m256* acc) {
    const __m256i packed = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales)));
    const __m256i scales16 = _mm256_and_si256(packed, _mm256_set1_epi16(0x0F));
    const __m256i mins16 = _mm256_srli_epi16(packed, 4);
    alignas(32) int16_t scales[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(scales), scales16);
    auto unpack = [&](int h, __m256i* q) { unpack_2bit_half(w.qs, h, q); };
    __m256i isum[C];
    add_scaled_per16<decltype(unpack), C>(unpack, scales, x, b, isum);
    const float d = f16(w.d), dmin = f16(w.dmin);
    for (int c = 0; c < C; ++c) acc[c] = finish(acc[c], d, dmin, x[c][b], isum[c], sums_times(x[c][b], mins16));
  }
};

// IQ4_XS: value d * (ls - 32) * level, 8 sub-blocks of 32, each ordered as an IQ4_NL block.
struct KindIQ4_XS {
  using Block = BlockIQ4_XS;
  using Column = Q8KColumn;
  static constexpr int64_t kValues = kSuperBlock;
  template <int C>
  static void add(const Block& w, const Column* x, int64_t b, __m256* acc) {
    const __m256i table = iq4_table();
    __m256i isum[C];
    for (auto& s : isum) s = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {  // sub-blocks 2p, 2p + 1: one 128-bit lane of quant bytes each
      const __m256i v = load32(w.qs + 32 * p);
      const __m256i low = low_nibbles(v), high = high_nibbles(v);
      const __m256i levels[2] = {_mm256_shuffle_epi8(table, _mm256_permute2x128_si256(low, high, 0x20)),
                                 _mm256_shuffle_epi8(table, _mm256_permute2x128_si256(low, high, 0x31))};
      for (int s = 0; s < 2; ++s) {
        const __m256i scale = _mm256_set1_epi16(static_cast<int16_t>(quant::scale_iq4_xs(w, 2 * p + s)));
        for (int c = 0; c < C; ++c)
          isum[c] = add_scaled(isum[c], pair_sums_signed(levels[s], load32(x[c][b].qs + 64 * p + 32 * s)), scale);
      }
    }
    const float d = f16(w.d);
    for (int c = 0; c < C; ++c) acc[c] = finish(acc[c], d, x[c][b], isum[c]);
  }
};

// ---- 32-value types, Q8_0-like activations ----

struct Q8Column {
  const int8_t* q;      // 32 quants per block
  const float* d;       // the block's step
  const int32_t* qsum;  // the sum of the block's quants
};

// Q5_0 (value d * (q - 16)) and Q5_1 (value d * q + m), q 0..31: Q4_0's nibbles plus qh's bits.
template <bool kHasMin>
struct KindQ5 {
  using Block = std::conditional_t<kHasMin, BlockQ5_1, BlockQ5_0>;
  using Column = Q8Column;
  static constexpr int64_t kValues = kQuantBlock;
  template <int C>
  static void add(const Block& w, const Column* x, int64_t b, __m256* acc) {
    const __m256i q = q5_quants(w);
    const float d = f16(w.d);
    for (int c = 0; c < C; ++c) {
      // Per lane (an eighth of the block): Q5_0's zero point 16 * qsum comes off the integers,
      // Q5_1's min m * x.d * qsum is added in floats.
      const __m256i start = kHasMin ? _mm256_setzero_si256() : _mm256_set1_epi32(-2 * x[c].qsum[b]);
      const __m256i dot = add_products(start, q, load32(x[c].q + 32 * b));
      acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d * x[c].d[b]), to_float(dot), acc[c]);
      if constexpr (kHasMin)
        acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(f16(w.m) * 0.125f),
                                 _mm256_set1_ps(x[c].d[b] * static_cast<float>(x[c].qsum[b])), acc[c]);
    }
  }
};
using KindQ5_0 = KindQ5<false>;
using KindQ5_1 = KindQ5<true>;

// IQ4_NL: value d * level.
struct KindIQ4_NL {
  using Block = BlockIQ4_NL;
  using Column = Q8Column;
  static constexpr int64_t kValues = kQuantBlock;
  template <int C>
  static void add(const Block& w, const Column* x, int64_t b, __m256* acc) {
    const __m256i levels = iq4_levels(w.qs);
    const float d = f16(w.d);
    for (int c = 0; c < C; ++c) {
      const __m256i dot =
          add_scaled(_mm256_setzero_si256(), pair_sums_signed(levels, load32(x[c].q + 32 * b)), _mm256_set1_epi16(1));
      acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d * x[c].d[b]), to_float(dot), acc[c]);
    }
  }
};

}  // namespace ggl::GGL_ISA::kquant
#endif
