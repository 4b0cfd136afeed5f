// The NEON innermost steps of the integer GEMMs, for the walks written once in cpu/simd/gemm_panel.h
// and gemm_rows.h (the interface is described there), for both ARM sets: `neon` (ARMv8-A) and
// `neon_dotprod` (ARMv8.2-A + dotprod, where the compiler defines __ARM_FEATURE_DOTPROD; only the
// byte dot steps differ). 4 rows per vector (xsimd's batch on NEON), register tiles of 2 vectors
// (8 rows) by 4 columns: with the 16-bit step's two accumulators per (vector, column), 8 float
// sums + 16 integer sums + 2 weight vectors + the broadcast activation word = 27 of the 32
// registers. The dot steps:
//   16-bit pairs: SMLAL / SMLAL2 (vmlal_s16, vmlal_high_s16), 4 products each, into two int32
//                 accumulators whose pairwise sum (ADDP) is each row's pair sum, once per block
//                 (as many products per instruction as float32 FMLA: what it gains over the float
//                 path on ARM hardware is unmeasured);
//   byte quads:   SDOT (vdotq_s32), 16 products, on neon_dotprod; on neon, SMLAL / SMLAL2 on bytes
//                 (vmlal_s8, vmlal_high_s8), 8 products each, into int16 sums (8 steps of at most
//                 15 * 127: 15240, no overflow) added up once per block. That is 8 products per
//                 instruction against float32 FMLA's 4, so the 8-bit GEMM is kept on plain NEON.
// Included through cpu/simd/gemm_steps.h only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ggml-like/cpu/arch/arm/arm_intrinsics.h"
#include "ggml-like/cpu/arch/arm/gemm_rows_arm.h"

namespace ggl::GGL_ISA::gemm_steps {

inline constexpr int64_t kLanes = 4;  // rows per vector
inline constexpr int kTileVecs = 2;   // row vectors per register tile
inline constexpr int kMaxCols = 4;    // activation columns per register tile

// y[i] = v lane i for i < count.
inline void store_rows(float* y, float32x4_t v, int64_t count) {
  if (count == kLanes) return vst1q_f32(y, v);
  float lanes[kLanes];
  vst1q_f32(lanes, v);
  std::memcpy(y, lanes, static_cast<size_t>(count) * sizeof(float));
}

// A lane group's rows for gather_f16: `count` of them, row_stride bytes apart.
struct GroupRows {
  int64_t count;
  size_t row_stride;
};
inline GroupRows group_rows(int64_t count, size_t row_stride) { return {count, row_stride}; }
// Lane r: the fp16 at `base + r * row_stride` as a float; lanes past the group's rows are 0.
inline float32x4_t gather_f16(const uint8_t* base, const GroupRows& rows) {
  uint16_t h[kLanes] = {};
  for (int64_t r = 0; r < rows.count; ++r) std::memcpy(&h[r], base + r * rows.row_stride, sizeof(uint16_t));
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

// 16 bytes at offset `at` of 4 rows: r[i] holds row i.
inline void load_rows(const uint8_t* const* qs, size_t at, uint8x16_t* r) {
  for (int i = 0; i < 4; ++i) r[i] = vld1q_u8(qs[i] + at);
}

// The 8 16-bit words of 4 rows' 16 bytes (load_rows), transposed: the low half of t[p] holds word
// 2p of rows 0..3, its high half word 2p + 1.
inline void transpose_words(const uint8x16_t* r, int8x16_t* t) {
  const uint16x8_t r0 = vreinterpretq_u16_u8(r[0]), r1 = vreinterpretq_u16_u8(r[1]);
  const uint16x8_t r2 = vreinterpretq_u16_u8(r[2]), r3 = vreinterpretq_u16_u8(r[3]);
  // Rows 0, 1 (and 2, 3) interleaved a word at a time: a0, a2 hold words 0..3, a1, a3 words 4..7.
  const uint32x4_t a0 = vreinterpretq_u32_u16(vzip1q_u16(r0, r1)), a1 = vreinterpretq_u32_u16(vzip2q_u16(r0, r1));
  const uint32x4_t a2 = vreinterpretq_u32_u16(vzip1q_u16(r2, r3)), a3 = vreinterpretq_u32_u16(vzip2q_u16(r2, r3));
  t[0] = vreinterpretq_s8_u32(vzip1q_u32(a0, a2));
  t[1] = vreinterpretq_s8_u32(vzip2q_u32(a0, a2));
  t[2] = vreinterpretq_s8_u32(vzip1q_u32(a1, a3));
  t[3] = vreinterpretq_s8_u32(vzip2q_u32(a1, a3));
}

// The 4 32-bit words of 4 rows (r[i]: row i), transposed: t[u] holds word u of rows 0..3.
inline void transpose_dwords(const uint32x4_t* r, uint32x4_t* t) {
  // Rows 0, 1 (and 2, 3) interleaved a word at a time: a0, a2 hold words 0, 1; a1, a3 words 2, 3.
  const uint64x2_t a0 = vreinterpretq_u64_u32(vzip1q_u32(r[0], r[1])),
                   a1 = vreinterpretq_u64_u32(vzip2q_u32(r[0], r[1]));
  const uint64x2_t a2 = vreinterpretq_u64_u32(vzip1q_u32(r[2], r[3])),
                   a3 = vreinterpretq_u64_u32(vzip2q_u32(r[2], r[3]));
  t[0] = vreinterpretq_u32_u64(vzip1q_u64(a0, a2));
  t[1] = vreinterpretq_u32_u64(vzip2q_u64(a0, a2));
  t[2] = vreinterpretq_u32_u64(vzip1q_u64(a1, a3));
  t[3] = vreinterpretq_u32_u64(vzip2q_u64(a1, a3));
}

inline void store_step(uint8_t* out, int step, int16x8_t v) {
  vst1q_s16(reinterpret_cast<int16_t*>(out + step * 16), v);
}

// Pairs of 16-bit values (16-bit activations). A weight vector holds a pair of int16 per row; SMLAL
// multiplies the low 4 int16 (rows 0, 1) by the broadcast pair and SMLAL2 the high 4 (rows 2, 3),
// each into its own accumulator, and one pairwise add per block gives each row its sum.
struct Pairs {
  struct Sum {
    int32x4_t rows01, rows23;
  };
  static Sum zero() { return {vdupq_n_s32(0), vdupq_n_s32(0)}; }
  static Sum add(Sum acc, int32x4_t w, int32x4_t x) {
    const int16x8_t w16 = vreinterpretq_s16_s32(w), x16 = vreinterpretq_s16_s32(x);
    return {vmlal_s16(acc.rows01, vget_low_s16(w16), vget_low_s16(x16)), vmlal_high_s16(acc.rows23, w16, x16)};
  }
  static int32x4_t total(Sum s) { return vpaddq_s32(s.rows01, s.rows23); }

  // The 16 pair vectors of one lane group from 4 rows' 16 bytes of 4-bit quants (element i in the
  // low nibble of byte i, element 16 + i in its high nibble): the bytes transposed two at a time
  // (byte pair u holds elements 2u, 2u + 1 and 2u + 16, 2u + 17), then the nibbles split and
  // widened. offset8: Q4_0, whose quants are offset by 8.
  static void pack_q4(const uint8_t* const* qs, bool offset8, uint8_t* out) {
    uint8x16_t r[4];
    int8x16_t t[4];
    load_rows(qs, 0, r);
    transpose_words(r, t);
    const int8x16_t low4 = vdupq_n_s8(0x0F), offset = vdupq_n_s8(offset8 ? 8 : 0);
    for (int p = 0; p < 4; ++p) {
      const int8x16_t lo = vsubq_s8(vandq_s8(t[p], low4), offset);
      const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(vreinterpretq_u8_s8(t[p]), 4)), offset);
      const int u = 2 * p;  // pairs u, u + 1 (low nibbles) and u + 8, u + 9 (high nibbles)
      store_step(out, u, vmovl_s8(vget_low_s8(lo)));
      store_step(out, u + 1, vmovl_high_s8(lo));
      store_step(out, u + 8, vmovl_s8(vget_low_s8(hi)));
      store_step(out, u + 9, vmovl_high_s8(hi));
    }
  }
  // The 16 pair vectors of one lane group from 4 rows' 32 int16 weights each (w[r]: row r, 16-byte
  // aligned), a transpose of 32-bit pairs (the K-quant / IQ4 / Q5 types, unpacked to int16 by
  // arch/kquant_unpack.h).
  static void pack_words(const int16_t (*w)[32], uint8_t* out) {
    for (int quarter = 0; quarter < 4; ++quarter) {  // pairs 4 quarter .. 4 quarter + 3
      uint32x4_t rows[4], t[4];
      for (int r = 0; r < 4; ++r) rows[r] = vreinterpretq_u32_s16(vld1q_s16(w[r] + 8 * quarter));
      transpose_dwords(rows, t);
      for (int u = 0; u < 4; ++u) store_step(out, 4 * quarter + u, vreinterpretq_s16_u32(t[u]));
    }
  }
  // The 16 pair vectors of one lane group from 4 rows' 32 signed bytes (Q8_0).
  static void pack_q8(const uint8_t* const* qs, uint8_t* out) {
    for (int half = 0; half < 2; ++half) {
      uint8x16_t r[4];
      int8x16_t t[4];
      load_rows(qs, 16 * half, r);
      transpose_words(r, t);
      for (int p = 0; p < 4; ++p) {
        store_step(out, 8 * half + 2 * p, vmovl_s8(vget_low_s8(t[p])));
        store_step(out, 8 * half + 2 * p + 1, vmovl_high_s8(t[p]));
      }
    }
  }
};

// Quads of bytes (8-bit activations, 4-bit weights 0..15 as signed bytes): a weight vector holds
// 4 bytes per row, the activation word 4 bytes broadcast.
struct Quads {
#if defined(__ARM_FEATURE_DOTPROD)
  using Sum = int32x4_t;
  static Sum zero() { return vdupq_n_s32(0); }
  static Sum add(Sum acc, int32x4_t w, int32x4_t x) {
    return vdotq_s32(acc, vreinterpretq_s8_s32(w), vreinterpretq_s8_s32(x));
  }
  static int32x4_t total(Sum s) { return s; }
#else
  struct Sum {  // the byte products of rows 0, 1 and of rows 2, 3, 4 per row, as int16
    int16x8_t rows01, rows23;
  };
  static Sum zero() { return {vdupq_n_s16(0), vdupq_n_s16(0)}; }
  static Sum add(Sum acc, int32x4_t w, int32x4_t x) {
    const int8x16_t w8 = vreinterpretq_s8_s32(w), x8 = vreinterpretq_s8_s32(x);
    return {vmlal_s8(acc.rows01, vget_low_s8(w8), vget_low_s8(x8)), vmlal_high_s8(acc.rows23, w8, x8)};
  }
  // Pairwise adds: 8 sums of 2 lanes (at most 30480), then each row's 2 widened and added.
  static int32x4_t total(Sum s) { return vpaddlq_s16(vpaddq_s16(s.rows01, s.rows23)); }
#endif

  // The 8 quad vectors of one lane group from 4 rows' 16 bytes of 4-bit quants: the bytes
  // transposed 4 at a time (dword u holds elements 4u..4u+3 in its low nibbles and 16+4u..19+4u in
  // its high nibbles), then the nibbles split into quads u and u + 4.
  static void pack_q4(const uint8_t* const* qs, uint8_t* out) {
    uint8x16_t r[4];
    load_rows(qs, 0, r);
    const uint32x4_t rows[4] = {vreinterpretq_u32_u8(r[0]), vreinterpretq_u32_u8(r[1]), vreinterpretq_u32_u8(r[2]),
                                vreinterpretq_u32_u8(r[3])};
    uint32x4_t t[4];
    transpose_dwords(rows, t);
    const uint8x16_t low4 = vdupq_n_u8(0x0F);
    for (int u = 0; u < 4; ++u) {
      const uint8x16_t quads = vreinterpretq_u8_u32(t[u]);
      vst1q_u8(out + u * 16, vandq_u8(quads, low4));
      vst1q_u8(out + (u + 4) * 16, vshrq_n_u8(quads, 4));
    }
  }
};

// The 32 nibbles of a 4-bit block's 16 quant bytes (element i low in byte i, element 16 + i high):
// elements 0..15 in lo, 16..31 in hi, as bytes 0..15.
struct Nibbles {
  uint8x16_t lo, hi;
};
inline Nibbles q4_nibbles(const uint8_t* qs) {
  const uint8x16_t bytes = vld1q_u8(qs);
  return {vandq_u8(bytes, vdupq_n_u8(0x0F)), vshrq_n_u8(bytes, 4)};
}

// The rows path with 16-bit activations: the block's 32 weights widened to int16 once, then
// SMLAL / SMLAL2 with the column's int16 values, 8 lane sums. Exact for Q8_0's signed bytes as for
// 4-bit quants: nothing to correct.
struct PairRows {
  struct Weights {
    int16x8_t v[4];  // elements 8i..8i+7
    void store(int16_t* out) const {
      for (int i = 0; i < 4; ++i) vst1q_s16(out + 8 * i, v[i]);
    }
  };
  static constexpr bool kQ8UsesHiOffset = false;
  static Weights q4(const uint8_t* qs) {
    const Nibbles n = q4_nibbles(qs);
    return {{vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(n.lo))), vreinterpretq_s16_u16(vmovl_high_u8(n.lo)),
             vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(n.hi))), vreinterpretq_s16_u16(vmovl_high_u8(n.hi))}};
  }
  static Weights q8(const uint8_t* qs) {
    const int8x16_t a = vld1q_s8(reinterpret_cast<const int8_t*>(qs)),
                    b = vld1q_s8(reinterpret_cast<const int8_t*>(qs + 16));
    return {{vmovl_s8(vget_low_s8(a)), vmovl_high_s8(a), vmovl_s8(vget_low_s8(b)), vmovl_high_s8(b)}};
  }
  // 8 lane sums of the block's 32 products, from the block's int16 activations q: elements 0..15
  // in the low 4 lanes, 16..31 in the high 4.
  static gemm_rows_arm::RowSums sums(const Weights& w, const int16_t* q, const int8_t*, const uint8_t*) {
    int32x4_t half[2];
    for (int h = 0; h < 2; ++h) {
      const int16x8_t q0 = vld1q_s16(q + 16 * h), q1 = vld1q_s16(q + 16 * h + 8);
      const int16x8_t w0 = w.v[2 * h], w1 = w.v[2 * h + 1];
      int32x4_t s = vmull_s16(vget_low_s16(w0), vget_low_s16(q0));
      s = vmlal_high_s16(s, w0, q0);
      s = vmlal_s16(s, vget_low_s16(w1), vget_low_s16(q1));
      half[h] = vmlal_high_s16(s, w1, q1);
    }
    return {half[0], half[1]};
  }
  static gemm_rows_arm::RowSums signed_sums(const Weights& w, const int16_t* q, const int8_t* hi, const uint8_t* lo) {
    return sums(w, q, hi, lo);
  }
};

// 4 lane sums of 16 byte products (a times b).
inline int32x4_t dot_bytes(int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(vdupq_n_s32(0), a, b);
#else
  return vpaddlq_s16(vmlal_high_s8(vmull_s8(vget_low_s8(a), vget_low_s8(b)), a, b));
#endif
}

// The rows path with 8-bit activations: a block's 32 nibbles times its 32 activation bytes.
struct QuadRows {
  using Weights = Nibbles;
  static Weights q4(const uint8_t* qs) { return q4_nibbles(qs); }
  static gemm_rows_arm::RowSums sums(const Weights& w, const int8_t* q) {
    return {dot_bytes(vreinterpretq_s8_u8(w.lo), vld1q_s8(q)), dot_bytes(vreinterpretq_s8_u8(w.hi), vld1q_s8(q + 16))};
  }
};

using namespace gemm_rows_arm;  // the rows path's float lanes

}  // namespace ggl::GGL_ISA::gemm_steps
