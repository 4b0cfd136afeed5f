// The AVX2 (with FMA, F16C) innermost steps of the integer GEMMs, for the walks written once in
// cpu/simd/gemm_panel.h and gemm_rows.h (the interface is described there): 8 rows per vector,
// register tiles of 2 vectors (16 rows) by 3 columns (16 ymm registers: 12 accumulators, two
// weight vectors, the broadcast activation word). Without VNNI (the avx2 set) the dot steps are
// VPMADDWD + VPADDD (16-bit pairs) and VPMADDUBSW + VPMADDWD (byte quads); the avx2vnni set
// compiles the same file with AVX-VNNI, whose VPDPWSSD / VPDPBUSD do each in one instruction.
// Included through cpu/simd/gemm_steps.h.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ggml-like/cpu/arch/x86/gemm_rows8_x86.h"
#include "ggml-like/cpu/arch/x86/gemm_rows_x86.h"
#include "ggml-like/cpu/arch/x86/transposed_x86.h"
#include "ggml-like/cpu/arch/x86/x86_intrinsics.h"

namespace ggl::GGL_ISA::gemm_steps {

inline constexpr int64_t kLanes = 8;  // rows per vector
inline constexpr int kTileVecs = 2;   // row vectors per register tile
inline constexpr int kMaxCols = 3;    // activation columns per register tile

// Lanes below `count` all ones.
inline __m256i first_lanes(int64_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(count)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
// y[i] = v lane i for i < count.
inline void store_rows(float* y, __m256 v, int64_t count) {
  if (count == kLanes) return _mm256_storeu_ps(y, v);
  _mm256_maskstore_ps(y, first_lanes(count), v);
}

// The byte offsets of a lane group's rows (`count` of them, row_stride apart) for gather_f16.
struct GroupRows {
  __m256i offsets, valid;
};
inline GroupRows group_rows(int64_t count, size_t row_stride) {
  alignas(32) int32_t offsets[kLanes];
  for (int64_t i = 0; i < kLanes; ++i) offsets[i] = static_cast<int32_t>(i < count ? i * row_stride : 0);
  return {_mm256_load_si256(reinterpret_cast<const __m256i*>(offsets)), first_lanes(count)};
}
// Lane r: the fp16 at `base + offset of row r` as a float; lanes past the group's rows are 0.
// (Gathers 32 bits, so the two bytes after the fp16 must be readable: they are the rest of the block.)
inline __m256 gather_f16(const uint8_t* base, const GroupRows& rows) {
  const __m256i words =
      _mm256_and_si256(_mm256_mask_i32gather_epi32(_mm256_setzero_si256(), reinterpret_cast<const int*>(base),
                                                   rows.offsets, rows.valid, 1),
                       _mm256_set1_epi32(0xFFFF));
  return _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1)));
}

// 16 bytes at offset `at` of 8 rows, two rows per vector: r[i] holds rows i and i + 4.
inline void load_rows(const uint8_t* const* qs, size_t at, __m256i* r) {
  for (int i = 0; i < 4; ++i)
    r[i] =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs[i] + at))),
                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs[i + 4] + at)), 1);
}

// The 8 words of 8 rows' 16 bytes (load_rows), transposed: the low half of t[p] holds word 2p of
// rows 0..7, its high half word 2p + 1.
inline void transpose_words(const __m256i* r, __m256i* t) {
  const __m256i a0 = _mm256_unpacklo_epi16(r[0], r[1]), a1 = _mm256_unpackhi_epi16(r[0], r[1]);
  const __m256i a2 = _mm256_unpacklo_epi16(r[2], r[3]), a3 = _mm256_unpackhi_epi16(r[2], r[3]);
  // Per 128-bit half (rows 0..3, rows 4..7): words 2p, 2p + 1 of the 4 rows.
  const __m256i b[4] = {_mm256_unpacklo_epi32(a0, a2), _mm256_unpackhi_epi32(a0, a2), _mm256_unpacklo_epi32(a1, a3),
                        _mm256_unpackhi_epi32(a1, a3)};
  for (int p = 0; p < 4; ++p) t[p] = _mm256_permute4x64_epi64(b[p], 0xD8);
}

// 8 x 8 transpose of 32-bit elements, in place: v[r] lane j becomes v[j] lane r.
inline void transpose8(__m256i* v) {
  __m256i t[8], u[8];
  for (int i = 0; i < 8; i += 2) {  // rows pairwise: lanes j, j + 4 of rows i, i + 1 per 128-bit half
    t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {  // u[i + k]: column k (low half) and k + 4 (high half) of rows i..i+3
    u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x20);
    v[k + 4] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x31);
  }
}

// Pins a running sum to a register, in order: without it GCC reassociates a block's chain of
// integer adds into a tree, keeping every product alive at once and spilling most of them.
inline __m256i in_order(__m256i v) {
  asm("" : "+x"(v));
  return v;
}

// Pairs of 16-bit values (16-bit activations): VPMADDWD forms two products per lane, VPADDD adds
// them up.
struct Pairs {
  using Sum = __m256i;
  static Sum zero() { return _mm256_setzero_si256(); }
#if GGL_VNNI256  // the avx2vnni set: VPDPWSSD does both in one instruction
  static Sum add(Sum acc, __m256i w, __m256i x) { return vnni256::dpwssd(acc, w, x); }
#else
  static Sum add(Sum acc, __m256i w, __m256i x) { return in_order(_mm256_add_epi32(acc, _mm256_madd_epi16(w, x))); }
#endif
  static __m256i total(Sum s) { return s; }

  // The 16 pair vectors of one lane group from 8 rows' 16 bytes of 4-bit quants (element i in the
  // low nibble of byte i, element 16 + i in its high nibble): the bytes transposed two at a time
  // (byte pair u holds elements 2u, 2u + 1 and 2u + 16, 2u + 17), then the nibbles split and
  // widened. offset8: Q4_0, whose quants are offset by 8.
  static void pack_q4(const uint8_t* const* qs, bool offset8, uint8_t* out) {
    __m256i r[4], t[4];
    load_rows(qs, 0, r);
    transpose_words(r, t);
    const __m256i low4 = _mm256_set1_epi8(0x0F), eight = _mm256_set1_epi8(8);
    auto widen = [offset8](__m128i bytes) {
      return offset8 ? _mm256_cvtepi8_epi16(bytes) : _mm256_cvtepu8_epi16(bytes);
    };
    for (int p = 0; p < 4; ++p) {
      __m256i lo = _mm256_and_si256(t[p], low4), hi = _mm256_and_si256(_mm256_srli_epi16(t[p], 4), low4);
      if (offset8) {
        lo = _mm256_sub_epi8(lo, eight);
        hi = _mm256_sub_epi8(hi, eight);
      }
      const int u = 2 * p;  // pairs u, u + 1 (low nibbles) and u + 8, u + 9 (high nibbles)
      store(out, u, widen(_mm256_castsi256_si128(lo)));
      store(out, u + 1, widen(_mm256_extracti128_si256(lo, 1)));
      store(out, u + 8, widen(_mm256_castsi256_si128(hi)));
      store(out, u + 9, widen(_mm256_extracti128_si256(hi, 1)));
    }
  }
  // The 16 pair vectors of one lane group from 8 rows' 32 signed bytes (Q8_0).
  static void pack_q8(const uint8_t* const* qs, uint8_t* out) {
    for (int half = 0; half < 2; ++half) {
      __m256i r[4], t[4];
      load_rows(qs, 16 * half, r);
      transpose_words(r, t);
      for (int p = 0; p < 4; ++p) {
        store(out, 8 * half + 2 * p, _mm256_cvtepi8_epi16(_mm256_castsi256_si128(t[p])));
        store(out, 8 * half + 2 * p + 1, _mm256_cvtepi8_epi16(_mm256_extracti128_si256(t[p], 1)));
      }
    }
  }
  // The 16 pair vectors of one lane group from its 8 rows' 32 int16 weights (w[r]: row r's, in
  // element order; the types unpacked to 16 bits, gemm_panel.h's pack_unpacked_panel): the 8 x 16
  // 32-bit pairs transposed, 8 pairs at a time.
  static void pack_words(const int16_t (*w)[32], uint8_t* out) {
    for (int half = 0; half < 2; ++half) {
      __m256i v[8];
      for (int r = 0; r < 8; ++r) v[r] = _mm256_load_si256(reinterpret_cast<const __m256i*>(w[r] + 16 * half));
      transpose8(v);
      for (int j = 0; j < 8; ++j) store(out, 8 * half + j, v[j]);
    }
  }
  static void store(uint8_t* out, int step, __m256i v) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + step * 32), v);
  }
};

// Quads of bytes (8-bit activations, unsigned 4-bit weights): VPMADDUBSW forms pairs of byte
// products as int16, which add up in int16 over the block (8 steps of 2 products of at most
// 15 * 127 each: 30480, below 32767, so nothing saturates), and one VPMADDWD per block turns them
// into the int32 quad sums.
// With AVX-VNNI (the avx2vnni set) VPDPBUSD adds the four products into the int32 lane directly.
struct Quads {
  using Sum = __m256i;  // 16 int16 sums; 8 int32 sums with VNNI
  static Sum zero() { return _mm256_setzero_si256(); }
#if GGL_VNNI256
  static Sum add(Sum acc, __m256i w, __m256i x) { return vnni256::dpbusd(acc, w, x); }
  static __m256i total(Sum s) { return s; }
#else
  static Sum add(Sum acc, __m256i w, __m256i x) { return in_order(_mm256_add_epi16(acc, _mm256_maddubs_epi16(w, x))); }
  static __m256i total(Sum s) { return _mm256_madd_epi16(s, _mm256_set1_epi16(1)); }
#endif

  // The 8 quad vectors of one lane group from 8 rows' 16 bytes of 4-bit quants: the bytes
  // transposed 4 at a time (dword u holds elements 4u..4u+3 in its low nibbles and 16+4u..19+4u in
  // its high nibbles), then the nibbles split into quads u and u + 4.
  static void pack_q4(const uint8_t* const* qs, uint8_t* out) {
    __m256i r[4];
    load_rows(qs, 0, r);
    const __m256i a0 = _mm256_unpacklo_epi32(r[0], r[1]), a1 = _mm256_unpackhi_epi32(r[0], r[1]);
    const __m256i a2 = _mm256_unpacklo_epi32(r[2], r[3]), a3 = _mm256_unpackhi_epi32(r[2], r[3]);
    // Per 128-bit half (rows 0..3, rows 4..7), dword u of the 4 rows: rows 0..7 in lane order.
    const __m256i t[4] = {_mm256_unpacklo_epi64(a0, a2), _mm256_unpackhi_epi64(a0, a2), _mm256_unpacklo_epi64(a1, a3),
                          _mm256_unpackhi_epi64(a1, a3)};
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int u = 0; u < 4; ++u) {
      Pairs::store(out, u, _mm256_and_si256(t[u], low4));
      Pairs::store(out, u + 4, _mm256_and_si256(_mm256_srli_epi16(t[u], 4), low4));
    }
  }
};

// The rows path with 16-bit activations: the block's 32 weights widened to int16 once (elements
// 0..15 and 16..31), then VPMADDWD with the column's int16 values. (VPMADDUBSW would saturate on
// the low bytes of 16-bit values times signed weights, so the AVX-512 split into bytes does not
// carry over.) Exact for Q8_0's signed bytes as for 4-bit quants: nothing to correct.
struct PairRows {
  struct Weights {
    __m256i lo, hi;
  };
  static constexpr bool kQ8UsesHiOffset = false;
  static Weights q4(const uint8_t* qs) {
    const __m256i bytes = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    return {_mm256_and_si256(bytes, _mm256_set1_epi16(0x0F)), _mm256_srli_epi16(bytes, 4)};
  }
  static Weights q8(const uint8_t* qs) {
    return {_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs))),
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16)))};
  }
  // 8 lane sums of the block's 32 products, from the block's int16 activations q.
  static __m256i sums(const Weights& w, const int16_t* q, const int8_t*, const uint8_t*) {
#if GGL_VNNI256  // the avx2vnni set (the AVX-512 set's byte split measured slower here than widening)
    // The byte split's figures: docs/cpu-speed.md, "Decode rows".
    return vnni256::dpwssd(vnni256::dpwssd(_mm256_setzero_si256(), w.lo, load(q)), w.hi, load(q + 16));
#else
    return _mm256_add_epi32(_mm256_madd_epi16(w.lo, load(q)), _mm256_madd_epi16(w.hi, load(q + 16)));
#endif
  }
  static __m256i signed_sums(const Weights& w, const int16_t* q, const int8_t* hi, const uint8_t* lo) {
    return sums(w, q, hi, lo);
  }
  static __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
};

// The rows path with 8-bit activations: a block's 32 nibbles times its 32 activation bytes.
struct QuadRows {
  using Weights = __m256i;
  static Weights q4(const uint8_t* qs) { return gemm_rows_x86::q4_nibbles(qs); }
  static __m256i sums(Weights w, const int8_t* q) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
#if GGL_VNNI256
    return vnni256::dpbusd(_mm256_setzero_si256(), w, x);
#else
    return Quads::total(_mm256_maddubs_epi16(w, x));
#endif
  }
};

using namespace gemm_rows_x86;  // the rows path's float lanes

}  // namespace ggl::GGL_ISA::gemm_steps
