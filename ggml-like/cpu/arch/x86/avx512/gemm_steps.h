// The AVX-512 (BW, VL, VNNI) innermost steps of the integer GEMMs, for the walks written once in
// cpu/simd/gemm_panel.h and gemm_rows.h (the interface is described there): 16 rows per vector,
// register tiles of two vectors (32 rows) by 6 columns, VPDPWSSD / VPDPBUSD as the dot steps,
// panel groups unpacked with 512-bit permutes and transposes. Included through
// cpu/simd/gemm_steps.h only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ggml-like/cpu/arch/avx512_undefined.h"
#include "ggml-like/cpu/arch/x86/gemm_rows8_x86.h"
#include "ggml-like/cpu/arch/x86/gemm_rows_x86.h"
#include "ggml-like/cpu/arch/x86/transposed_x86.h"
#include "ggml-like/cpu/arch/x86/x86_intrinsics.h"

namespace ggl::GGL_ISA::gemm_steps {

inline constexpr int64_t kLanes = 16;  // rows per vector
inline constexpr int kTileVecs = 2;    // row vectors per register tile
inline constexpr int kMaxCols = 6;     // activation columns per register tile

// y[i] = v lane i for i < count.
inline void store_rows(float* y, __m512 v, int64_t count) {
  _mm512_mask_storeu_ps(y, static_cast<__mmask16>((1u << count) - 1), v);
}

// The byte offsets of a lane group's rows (`count` of them, row_stride apart) for gather_f16.
struct GroupRows {
  __m512i offsets;
  __mmask16 valid;
};
inline GroupRows group_rows(int64_t count, size_t row_stride) {
  alignas(64) int32_t offsets[kLanes];
  for (int64_t i = 0; i < kLanes; ++i) offsets[i] = static_cast<int32_t>(i < count ? i * row_stride : 0);
  return {_mm512_load_si512(offsets), static_cast<__mmask16>((1u << count) - 1)};
}
// Lane r: the fp16 at `base + offset of row r` as a float; lanes past the group's rows are 0.
// (Gathers 32 bits, so the two bytes after the fp16 must be readable: they are the rest of the block.)
GGL_AVX512_UNDEFINED_BEGIN
inline __m512 gather_f16(const uint8_t* base, const GroupRows& rows) {
  const __m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), rows.valid, rows.offsets, base, 1);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));
}

// 16 x 16 transpose of 32-bit elements, in place: v[r] lane j becomes v[j] lane r.
inline void transpose16(__m512i* v) {
  __m512i a[16], b[16];
  for (int i = 0; i < 16; i += 2) {  // interleave rows pairwise, 32 bits at a time
    a[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
    a[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
  }
  // Now 64 bits at a time: 128-bit lane L of b[4i + k] holds column 4L + k of rows 4i..4i+3.
  for (int i = 0; i < 16; i += 4) {
    b[i] = _mm512_unpacklo_epi64(a[i], a[i + 2]);
    b[i + 1] = _mm512_unpackhi_epi64(a[i], a[i + 2]);
    b[i + 2] = _mm512_unpacklo_epi64(a[i + 1], a[i + 3]);
    b[i + 3] = _mm512_unpackhi_epi64(a[i + 1], a[i + 3]);
  }
  // Finally gather 128-bit lane L of b[k], b[4 + k], b[8 + k], b[12 + k] into column 4L + k.
  for (int k = 0; k < 4; ++k) {
    const __m512i c0 = _mm512_shuffle_i32x4(b[k], b[4 + k], 0x44), c1 = _mm512_shuffle_i32x4(b[k], b[4 + k], 0xEE);
    const __m512i c2 = _mm512_shuffle_i32x4(b[8 + k], b[12 + k], 0x44),
                  c3 = _mm512_shuffle_i32x4(b[8 + k], b[12 + k], 0xEE);
    v[k] = _mm512_shuffle_i32x4(c0, c2, 0x88);
    v[4 + k] = _mm512_shuffle_i32x4(c0, c2, 0xDD);
    v[8 + k] = _mm512_shuffle_i32x4(c1, c3, 0x88);
    v[12 + k] = _mm512_shuffle_i32x4(c1, c3, 0xDD);
  }
}
GGL_AVX512_UNDEFINED_END

// The 16 quant bytes of 16 rows' 4-bit blocks (qs[r]), four rows per vector: z[i] holds rows
// 4i..4i+3, one per 128-bit lane.
inline void load_q4_rows(const uint8_t* const* qs, __m512i* z) {
  // The lane index of VINSERTI32X4 is an immediate: written out, not left to loop unrolling.
  auto row = [qs](int r) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs[r])); };
  for (int i = 0; i < 4; ++i) {
    __m512i v = _mm512_castsi128_si512(row(4 * i));
    v = _mm512_inserti32x4(v, row(4 * i + 1), 1);
    v = _mm512_inserti32x4(v, row(4 * i + 2), 2);
    z[i] = _mm512_inserti32x4(v, row(4 * i + 3), 3);
  }
}

// Pairs of 16-bit values (16-bit activations): VPDPWSSD adds two products per lane.
struct Pairs {
  using Sum = __m512i;
  static Sum zero() { return _mm512_setzero_si512(); }
  static Sum add(Sum acc, __m512i w, __m512i x) { return _mm512_dpwssd_epi32(acc, w, x); }
  static __m512i total(Sum s) { return s; }

  // The 16 pair vectors of one lane group from 16 rows' 16 bytes of 4-bit quants (element i in the
  // low nibble of byte i, element 16 + i in its high nibble), without widening first: the bytes are
  // transposed two at a time (byte pair u holds elements 2u, 2u + 1 and 2u + 16, 2u + 17), then the
  // nibbles split and widened. offset8: Q4_0, whose quants are offset by 8.
  static void pack_q4(const uint8_t* const* qs, bool offset8, uint8_t* out) {
    __m512i z[4];
    load_q4_rows(qs, z);
    // Word slot s of the transposed vector for byte pairs u = 2p, 2p + 1: row R = s % 16 and
    // u = 2p + s / 16, found in z[R / 4] at word (R % 4) * 8 + u; rows 0..7 come from (z0, z1),
    // rows 8..15 from (z2, z3) at the same indices.
    alignas(64) int16_t index[32];
    for (int slot = 0; slot < 32; ++slot) {
      const int r = slot % 8;
      index[slot] = static_cast<int16_t>((r / 4) * 32 + (r % 4) * 8 + slot / 16);
    }
    const __m512i base = _mm512_load_si512(index);
    const __m512i low4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
    auto widen = [offset8](__m256i bytes) {
      return offset8 ? _mm512_cvtepi8_epi16(bytes) : _mm512_cvtepu8_epi16(bytes);
    };
    for (int p = 0; p < 4; ++p) {
      const __m512i idx = _mm512_add_epi16(base, _mm512_set1_epi16(static_cast<short>(2 * p)));
      const __m512i rows0_7 = _mm512_permutex2var_epi16(z[0], idx, z[1]);
      const __m512i rows8_15 = _mm512_permutex2var_epi16(z[2], idx, z[3]);
      const __m512i pairs = _mm512_mask_blend_epi16(0xFF00FF00u, rows0_7, rows8_15);
      __m512i lo = _mm512_and_si512(pairs, low4), hi = _mm512_and_si512(_mm512_srli_epi16(pairs, 4), low4);
      if (offset8) {
        lo = _mm512_sub_epi8(lo, eight);
        hi = _mm512_sub_epi8(hi, eight);
      }
      const int j = 2 * p;  // pairs j, j + 1 (low nibbles) and j + 8, j + 9 (high nibbles)
      GGL_AVX512_UNDEFINED_BEGIN
      _mm512_store_si512(out + j * 64, widen(_mm512_castsi512_si256(lo)));
      _mm512_store_si512(out + (j + 1) * 64, widen(_mm512_extracti64x4_epi64(lo, 1)));
      _mm512_store_si512(out + (j + 8) * 64, widen(_mm512_castsi512_si256(hi)));
      _mm512_store_si512(out + (j + 9) * 64, widen(_mm512_extracti64x4_epi64(hi, 1)));
      GGL_AVX512_UNDEFINED_END
    }
  }
  // The 16 pair vectors of one lane group from 16 rows' 32 signed bytes (Q8_0).
  static void pack_q8(const uint8_t* const* qs, uint8_t* out) {
    __m512i v[kLanes];
    for (int64_t r = 0; r < kLanes; ++r)
      v[r] = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs[r])));
    transpose16(v);
    for (int64_t j = 0; j < kLanes; ++j) _mm512_store_si512(out + j * 64, v[j]);
  }
  // The 16 pair vectors of one lane group from its 16 rows' 32 int16 weights (w[r]: row r's, in
  // element order; the types unpacked to 16 bits, gemm_panel.h's pack_unpacked_panel): the
  // 16 x 16 32-bit pairs transposed.
  static void pack_words(const int16_t (*w)[32], uint8_t* out) {
    __m512i v[kLanes];
    for (int64_t r = 0; r < kLanes; ++r) v[r] = _mm512_load_si512(w[r]);
    transpose16(v);
    for (int64_t j = 0; j < kLanes; ++j) _mm512_store_si512(out + j * 64, v[j]);
  }
};

// Quads of bytes (8-bit activations, unsigned 4-bit weights): VPDPBUSD adds four products per lane.
struct Quads {
  using Sum = __m512i;
  static Sum zero() { return _mm512_setzero_si512(); }
  static Sum add(Sum acc, __m512i w, __m512i x) { return _mm512_dpbusd_epi32(acc, w, x); }
  static __m512i total(Sum s) { return s; }

  // The 8 quad vectors of one lane group from 16 rows' 16 bytes of 4-bit quants: the bytes are
  // transposed 4 at a time (dword u holds elements 4u..4u+3 in its low nibbles and 16+4u..19+4u in
  // its high nibbles), then the nibbles split into quads u and u + 4.
  static void pack_q4(const uint8_t* const* qs, uint8_t* out) {
    __m512i z[4];
    load_q4_rows(qs, z);
    // Lane R of the transposed dword u: z[R / 4] dword (R % 4) * 4 + u; rows 0..7 from (z0, z1),
    // rows 8..15 from (z2, z3) at the same indices.
    alignas(64) int32_t index[kLanes];
    for (int r = 0; r < kLanes; ++r) index[r] = (r % 8 / 4) * 16 + (r % 4) * 4;
    const __m512i base = _mm512_load_si512(index);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (int u = 0; u < 4; ++u) {
      const __m512i idx = _mm512_add_epi32(base, _mm512_set1_epi32(u));
      const __m512i quads = _mm512_mask_blend_epi32(0xFF00, _mm512_permutex2var_epi32(z[0], idx, z[1]),
                                                    _mm512_permutex2var_epi32(z[2], idx, z[3]));
      _mm512_store_si512(out + u * 64, _mm512_and_si512(quads, low4));
      _mm512_store_si512(out + (u + 4) * 64, _mm512_and_si512(_mm512_srli_epi16(quads, 4), low4));
    }
  }
};

// The rows path with 16-bit activations: VPDPBUSD multiplies bytes, so the 16-bit values go in
// two: the weights times the high bytes (signed), shifted up 8 bits, plus the low bytes (unsigned)
// times the weights. Two byte products per 4 weights instead of one 16-bit product per 2, with no
// widening of the weights. VPDPBUSD takes one unsigned side: 4-bit weights are unsigned; Q8_0's
// signed bytes meet the signed high bytes as w + 128 (the sign bit flipped), and the extra
// 128 * hi comes off through the column's hi_offset (kQ8UsesHiOffset).
struct PairRows {
  using Weights = __m256i;
  static constexpr bool kQ8UsesHiOffset = true;
  static Weights q4(const uint8_t* qs) { return gemm_rows_x86::q4_nibbles(qs); }
  static Weights q8(const uint8_t* qs) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs)); }
  // 8 lane sums of the block's 32 products: `w` unsigned (4-bit quants) or signed (Q8_0); the
  // block's activations as int16 q, high bytes hi and low bytes lo.
  static __m256i sums(Weights w, const int16_t*, const int8_t* hi, const uint8_t* lo) {
    return _mm256_dpbusd_epi32(_mm256_slli_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), w, load(hi)), 8), load(lo),
                               w);
  }
  static __m256i signed_sums(Weights w, const int16_t*, const int8_t* hi, const uint8_t* lo) {
    const __m256i w_unsigned = _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80)));
    return _mm256_dpbusd_epi32(_mm256_slli_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), w_unsigned, load(hi)), 8),
                               load(lo), w);
  }
  static __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
};

// The rows path with 8-bit activations: a block's 32 nibbles times its 32 activation bytes.
struct QuadRows {
  using Weights = __m256i;
  static Weights q4(const uint8_t* qs) { return gemm_rows_x86::q4_nibbles(qs); }
  static __m256i sums(Weights w, const int8_t* q) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
  }
};

using namespace gemm_rows_x86;  // the rows path's float lanes

}  // namespace ggl::GGL_ISA::gemm_steps
