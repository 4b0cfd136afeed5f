// The x86 innermost steps of the decode rows path on 8 interleaved rows (cpu/simd/gemm_rows8.h,
// layout: cpu/interleaved.h), shared by the AVX2 and AVX-512 sets: 256-bit vectors whose lane r
// is row r of the group, so a block's 4 activations are broadcast once for 8 rows.
// Q4_0's nibbles (Quads, Bytes): without VNNI (the avx2 set) the byte products are VPMADDUBSW
// pairs added up in 16 bits where they cannot overflow; with VNNI (avx2vnni, avx512) VPDPBUSD
// adds each quad into 32 bits. Q8_0's signed bytes (Words) and Q6_K's 6-bit quants less 32
// (Q6Quads) widen to 16 bits and multiply 16-bit activations in pairs (VPMADDWD + VPADDD, or
// VPDPWSSD). Included by the x86 sets' gemm_steps.h.
#pragma once
#include <cstdint>
#include <cstring>

#include "ggml-like/cpu/arch/x86/x86_intrinsics.h"

#define GGL_ROWS8 1

namespace ggl::GGL_ISA::gemm_rows8_steps {

// A group's 8 rows side by side, lane r for row r: their float sums and scales, their int32 sums.
using GroupF = __m256;
using GroupI = __m256i;

inline GroupF zero_rows() { return _mm256_setzero_ps(); }
// y[0..8) = the 8 rows' sums.
inline void store_rows(float* y, GroupF v) { _mm256_storeu_ps(y, v); }
// Each row's total less k.
inline GroupI minus_each(GroupI total, int32_t k) { return _mm256_sub_epi32(total, _mm256_set1_epi32(k)); }
// acc + d * total * step: a block's integer lane sums (row r in lane r) times the rows' scales d
// and the column's step for the block.
inline GroupF add_block(GroupF acc, GroupF d, GroupI total, float step) {
  return _mm256_fmadd_ps(d, _mm256_mul_ps(_mm256_cvtepi32_ps(total), _mm256_set1_ps(step)), acc);
}

// The 8 rows' fp16 block scales at p as floats, lane r for row r.
inline GroupF scales(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// Lane r of quads: 4 quant bytes of row r. lo: their low nibbles (4 consecutive weights), hi:
// their high nibbles (the 4 weights 16 further on), as unsigned bytes 0..15.
struct Nibbles {
  __m256i lo, hi;
};
inline Nibbles nibbles(const uint8_t* quads) {
  const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quads));
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  return {_mm256_and_si256(q, low4), _mm256_and_si256(_mm256_srli_epi16(q, 4), low4)};
}

// 4 activation bytes at p in every lane.
inline __m256i broadcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm256_set1_epi32(v);
}

// Keeps a running sum in a register, in order (as gemm_steps.h's in_order: GCC would otherwise
// rebuild a block's chain of adds into a tree that spills).
inline __m256i in_order(__m256i v) {
  asm("" : "+x"(v));
  return v;
}

// 8-bit activations (signed bytes): per lane, the products of 4 + 4 weights with the activation
// bytes at xl (the low nibbles' weights) and xh (the high nibbles').
struct Quads {
  using Weights = Nibbles;
  static Weights load(const uint8_t* quads) { return nibbles(quads); }
#if GGL_VNNI256
  using Sum = __m256i;  // int32
  static Sum zero() { return _mm256_setzero_si256(); }
  static Sum add(Sum s, const Nibbles& w, const int8_t* xl, const int8_t* xh) {
    return vnni256::dpbusd(vnni256::dpbusd(s, w.lo, broadcast4(xl)), w.hi, broadcast4(xh));
  }
  static __m256i total(Sum s) { return s; }
#else
  // 16-bit pair sums: a block's 8 VPMADDUBSW results of at most 2 * 15 * 127 each add up to at
  // most 30480, below 32767.
  using Sum = __m256i;
  static Sum zero() { return _mm256_setzero_si256(); }
  static Sum add(Sum s, const Nibbles& w, const int8_t* xl, const int8_t* xh) {
    s = in_order(_mm256_add_epi16(s, _mm256_maddubs_epi16(w.lo, broadcast4(xl))));
    return in_order(_mm256_add_epi16(s, _mm256_maddubs_epi16(w.hi, broadcast4(xh))));
  }
  static __m256i total(Sum s) { return _mm256_madd_epi16(s, _mm256_set1_epi16(1)); }
#endif
};

// 16-bit activations split into bytes, x = 256 * hi + lo (hi signed, lo unsigned): the weights'
// products with the low bytes and with the high bytes are summed apart and joined at the end.
struct Bytes {
  using Weights = Nibbles;
  static Weights load(const uint8_t* quads) { return nibbles(quads); }
  struct Sum {
    __m256i lo, hi;
  };
  static Sum zero() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
#if GGL_VNNI256
  static Sum add(Sum s, const Nibbles& w, const uint8_t* lo_l, const uint8_t* lo_h, const int8_t* hi_l,
                 const int8_t* hi_h) {
    // The low bytes are the unsigned operand, the weights (0..15) the signed one.
    s.lo = vnni256::dpbusd(vnni256::dpbusd(s.lo, broadcast4(lo_l), w.lo), broadcast4(lo_h), w.hi);
    s.hi = vnni256::dpbusd(vnni256::dpbusd(s.hi, w.lo, broadcast4(hi_l)), w.hi, broadcast4(hi_h));
    return s;
  }
  static __m256i total(Sum s) { return _mm256_add_epi32(s.lo, _mm256_slli_epi32(s.hi, 8)); }
#else
  // Low bytes: a VPMADDUBSW pair is at most 2 * 255 * 15 = 7650, so each step's two are widened
  // to 32 bits at once (VPMADDWD). High bytes: at most 2 * 128 * 15 = 3840 a pair, a block's 8
  // add up in 16 bits (30720) and are widened, times 256, once per block.
  static Sum add(Sum s, const Nibbles& w, const uint8_t* lo_l, const uint8_t* lo_h, const int8_t* hi_l,
                 const int8_t* hi_h) {
    const __m256i lo =
        _mm256_add_epi16(_mm256_maddubs_epi16(broadcast4(lo_l), w.lo), _mm256_maddubs_epi16(broadcast4(lo_h), w.hi));
    s.lo = in_order(_mm256_add_epi32(s.lo, _mm256_madd_epi16(lo, _mm256_set1_epi16(1))));
    s.hi = in_order(_mm256_add_epi16(s.hi, _mm256_maddubs_epi16(w.lo, broadcast4(hi_l))));
    s.hi = in_order(_mm256_add_epi16(s.hi, _mm256_maddubs_epi16(w.hi, broadcast4(hi_h))));
    return s;
  }
  static __m256i total(Sum s) { return _mm256_add_epi32(s.lo, _mm256_madd_epi16(s.hi, _mm256_set1_epi16(256))); }
#endif
};

// 16-bit activations times signed byte weights (Q8_0) widened to 16 bits: lanes 2i and 2i + 1 of
// rows03 hold the pairs of weights 4u, 4u + 1 and 4u + 2, 4u + 3 of row i (rows47: row 4 + i),
// times the same pairs of activations in every lane pair. A lane's block sum is at most 8 quads
// of 2 * 127 * 16383: no overflow.
struct Words {
  struct Weights {
    __m256i rows03, rows47;
  };
  static Weights load(const uint8_t* quads) {
    const auto* p = reinterpret_cast<const __m128i*>(quads);
    return {_mm256_cvtepi8_epi16(_mm_loadu_si128(p)), _mm256_cvtepi8_epi16(_mm_loadu_si128(p + 1))};
  }
  // The same from a register of 32 signed bytes (quants computed, not loaded).
  static Weights widen(__m256i bytes) {
    return {_mm256_cvtepi8_epi16(_mm256_castsi256_si128(bytes)),
            _mm256_cvtepi8_epi16(_mm256_extracti128_si256(bytes, 1))};
  }
  using Sum = Weights;
  static Sum zero() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
  // x: the 4 activations 4u..4u+3.
  static Sum add(Sum s, const Weights& w, const int16_t* x) {
    int64_t quad;
    std::memcpy(&quad, x, sizeof quad);
    const __m256i a = _mm256_set1_epi64x(quad);
#if GGL_VNNI256
    return {vnni256::dpwssd(s.rows03, w.rows03, a), vnni256::dpwssd(s.rows47, w.rows47, a)};
#else
    return {in_order(_mm256_add_epi32(s.rows03, _mm256_madd_epi16(w.rows03, a))),
            in_order(_mm256_add_epi32(s.rows47, _mm256_madd_epi16(w.rows47, a)))};
#endif
  }
  // Row r's two lanes added: VPHADDD gives rows 0 1 4 5 | 2 3 6 7, put back in order.
  static __m256i total(Sum s) { return _mm256_permute4x64_epi64(_mm256_hadd_epi32(s.rows03, s.rows47), 0xD8); }
};

// Q6_K's quants (Q6_K_R8): per quad u of a 32-value sub-block, elements 4u..4u+3 (the first half
// of 16, one scale per row) and 16+4u..19+4u (the second half, another), 6-bit quants less 32 as
// Words weights; the halves are summed apart and scaled by their rows' scales in integers: a half's
// sum is at most 16 * 32 * 16383 per row, times |scale| <= 128 and two halves 2147352576 < 2^31.
struct Q6Quads {
  struct Weights {
    Words::Weights first, second;
  };
  struct Sum {
    Words::Sum first, second;
  };
  // The sub-block's two quads of top bits.
  struct High {
    __m256i first, second;
  };
  static High high(const uint8_t* quads) {
    const auto* p = reinterpret_cast<const __m256i*>(quads);
    return {_mm256_loadu_si256(p), _mm256_loadu_si256(p + 1)};
  }
  // Bits 2u, 2u + 1 of each byte moved to bits 4-5 (16-bit shifts: the bits they move across bytes
  // are masked off).
  static __m256i top2(__m256i high, int u) {
    const __m256i moved = u < 2 ? _mm256_slli_epi16(high, 4 - 2 * u) : _mm256_srli_epi16(high, 2 * u - 4);
    return _mm256_and_si256(moved, _mm256_set1_epi8(0x30));
  }
  static Weights load(const uint8_t* quad, const High& high, int u) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quad));
    const __m256i low4 = _mm256_set1_epi8(0x0F), zero = _mm256_set1_epi8(32);
    const __m256i first = _mm256_or_si256(_mm256_and_si256(q, low4), top2(high.first, u));
    const __m256i second = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), top2(high.second, u));
    return {Words::widen(_mm256_sub_epi8(first, zero)), Words::widen(_mm256_sub_epi8(second, zero))};
  }
  static Sum zero() { return {Words::zero(), Words::zero()}; }
  // x: the sub-block's 32 activations.
  static Sum add(Sum s, const Weights& w, const int16_t* x, int u) {
    return {Words::add(s.first, w.first, x + 4 * u), Words::add(s.second, w.second, x + 16 + 4 * u)};
  }
  // Lane r: row r's sum, each half times its scale (8 signed bytes each, row r at r).
  static __m256i total(const Sum& s, const uint8_t* first_scales, const uint8_t* second_scales) {
    auto scales = [](const uint8_t* p) {
      return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    };
    return _mm256_add_epi32(_mm256_mullo_epi32(Words::total(s.first), scales(first_scales)),
                            _mm256_mullo_epi32(Words::total(s.second), scales(second_scales)));
  }
};

}  // namespace ggl::GGL_ISA::gemm_rows8_steps
