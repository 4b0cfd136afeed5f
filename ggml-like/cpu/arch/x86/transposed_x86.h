// The x86 steps of the transposed product in 16-bit integers (cpu/simd/transposed_int16.cpp),
// shared by the AVX2 and AVX-512 sets on 256-bit vectors. Included by the x86 sets' gemm_steps.h.
//
// The product adds rows r of a Q4_0 / Q8_0 matrix, each times its activation a[r]; a block column
// (32 outputs) takes from row r the block's values d[r] * q. The block scales differ from row to
// row, so they are folded into the activations: a[r] * d[r] for the rows of a group (at most 32), in
// 16-bit integers with one float step per group and block column (prepare). Then two rows' quants
// of a block go side by side as 16-bit pairs in 32-bit lanes, lane j for output j, and VPMADDWD
// (VPDPWSSD with VNNI) multiplies them by the pair of activations (add_pair). The other block
// types come unpacked to 16-bit words per 32 values (add_pair_words), with float scales per
// sub-block (prepare from floats) and mins (weighted_mins).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ggml-like/core/types.h"
#include "ggml-like/cpu/arch/x86/x86_intrinsics.h"

#define GGL_TRANSPOSED_INT16 1

namespace ggl::GGL_ISA::transposed_steps {

inline constexpr int kColumns = 8;  // block columns one prepared vector covers
inline constexpr int32_t kLevels = 16383;

// The quantized activations of a group of rows (at most 32, an even count) for kColumns block
// columns: pairs[p * kColumns + k] holds rows 2p and 2p + 1 as two int16 (low, high) for block
// column k, scale[k] the step, qsum[k] the sum of the group's integers (for Q4_0's zero point).
struct Prepared {
  int32_t pairs[16 * kColumns];
  float scale[kColumns];
  int32_t qsum[kColumns];
};

// Quantizes v[r] (row r's activation times its kColumns block scales) to the pairs of `out`.
inline void quantize_pairs(const __m256* v, int rows, Prepared& out) {
  __m256 amax = _mm256_setzero_ps();
  for (int r = 0; r < rows; ++r) amax = _mm256_max_ps(amax, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v[r]));
  const __m256 zero = _mm256_setzero_ps();
  const __m256 nonzero = _mm256_cmp_ps(amax, zero, _CMP_GT_OQ);
  const __m256 inv = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(static_cast<float>(kLevels)), amax), nonzero);
  _mm256_storeu_ps(out.scale, _mm256_mul_ps(amax, _mm256_set1_ps(1.0f / kLevels)));
  __m256i qsum = _mm256_setzero_si256();
  for (int r = 0; r < rows; r += 2) {
    const __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(v[r], inv));
    const __m256i q1 = r + 1 < rows ? _mm256_cvtps_epi32(_mm256_mul_ps(v[r + 1], inv)) : _mm256_setzero_si256();
    qsum = _mm256_add_epi32(qsum, _mm256_add_epi32(q0, q1));
    const __m256i pair = _mm256_or_si256(_mm256_and_si256(q0, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(q1, 16));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.pairs + r / 2 * kColumns), pair);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.qsum), qsum);
}

// Group rows [0, rows) (row_stride bytes apart; d: the first of kColumns consecutive blocks'
// fp16 scales, block_bytes apart) with activations a[0, rows). Lanes past `columns` are unused.
inline void prepare(const uint8_t* d, size_t row_stride, size_t block_bytes, int rows, int columns, const float* a,
                    Prepared& out) {
  __m256 v[32];
  for (int r = 0; r < rows; ++r) {
    alignas(16) uint16_t h[kColumns] = {};
    for (int k = 0; k < kColumns; ++k)
      if (k < columns) std::memcpy(h + k, d + r * row_stride + k * block_bytes, sizeof(uint16_t));
    v[r] = _mm256_mul_ps(_mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h))), _mm256_set1_ps(a[r]));
  }
  quantize_pairs(v, rows, out);
}

// The same from float scales: d[r * kColumns + k], row r's scale of column k.
inline void prepare(const float* d, int rows, const float* a, Prepared& out) {
  __m256 v[32];
  for (int r = 0; r < rows; ++r) v[r] = _mm256_mul_ps(_mm256_loadu_ps(d + r * kColumns), _mm256_set1_ps(a[r]));
  quantize_pairs(v, rows, out);
}

// out[k] = sum over rows r of a[r] * m[r * kColumns + k]: the columns' mins times the activations.
inline void weighted_mins(const float* m, int rows, const float* a, float* out) {
  __m256 sum = _mm256_setzero_ps();
  for (int r = 0; r < rows; ++r) sum = _mm256_fmadd_ps(_mm256_loadu_ps(m + r * kColumns), _mm256_set1_ps(a[r]), sum);
  _mm256_storeu_ps(out, sum);
}

// The int32 sums of a block column's 32 outputs, 8 per vector.
struct Sums {
  __m256i v[4];
};
inline Sums zero() {
  return {{_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()}};
}

inline __m256i madd(__m256i sum, __m256i words, __m256i pair) {
#if GGL_VNNI256
  return vnni256::dpwssd(sum, words, pair);
#else
  return _mm256_add_epi32(sum, _mm256_madd_epi16(words, pair));
#endif
}
inline __m128i load8(const uint8_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }

// Adds the quants q0 (row 2p) and q1 (row 2p + 1) of one block times the activations' pair.
// Q4_0: the unsigned nibbles 0..15 (the zero point comes off through qsum); Q8_0: signed bytes.
// A lane's sum over a group of 32 rows is at most 32 * 127 * 16383, far inside int32.
template <Type T>
inline void add_pair(Sums& s, const uint8_t* q0, const uint8_t* q1, int32_t pair_bits) {
  const __m256i pair = _mm256_set1_epi32(pair_bits);
  if constexpr (T == Type::Q4_0) {
    const __m256i nibble = _mm256_set1_epi32(0x000F000F);
    // Bytes 0..7 and 8..15 of both rows, one row in each 16-bit half of a lane.
    const __m256i first =
        _mm256_or_si256(_mm256_cvtepu8_epi32(load8(q0)), _mm256_slli_epi32(_mm256_cvtepu8_epi32(load8(q1)), 16));
    const __m256i second = _mm256_or_si256(_mm256_cvtepu8_epi32(load8(q0 + 8)),
                                           _mm256_slli_epi32(_mm256_cvtepu8_epi32(load8(q1 + 8)), 16));
    s.v[0] = madd(s.v[0], _mm256_and_si256(first, nibble), pair);  // outputs 0..7: low nibbles
    s.v[1] = madd(s.v[1], _mm256_and_si256(second, nibble), pair);
    s.v[2] = madd(s.v[2], _mm256_and_si256(_mm256_srli_epi32(first, 4), nibble), pair);  // 16..23: high nibbles
    s.v[3] = madd(s.v[3], _mm256_and_si256(_mm256_srli_epi32(second, 4), nibble), pair);
  } else {
    static_assert(T == Type::Q8_0);
    const __m256i low = _mm256_set1_epi32(0xFFFF);
    for (int i = 0; i < 4; ++i) {
      const __m256i words = _mm256_or_si256(_mm256_and_si256(_mm256_cvtepi8_epi32(load8(q0 + 8 * i)), low),
                                            _mm256_slli_epi32(_mm256_cvtepi8_epi32(load8(q1 + 8 * i)), 16));
      s.v[i] = madd(s.v[i], words, pair);
    }
  }
}

// Adds two rows' 32 unpacked int16 weights (q0: row 2p, q1: row 2p + 1) times the activations'
// pair. The words interleave within 128-bit halves, so Sums' lanes hold outputs in the order
// finish_words undoes: v[2h] outputs 16h + {0..3, 8..11}, v[2h + 1] 16h + {4..7, 12..15}.
inline void add_pair_words(Sums& s, const int16_t* q0, const int16_t* q1, int32_t pair_bits) {
  const __m256i pair = _mm256_set1_epi32(pair_bits);
  for (int h = 0; h < 2; ++h) {
    const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(q0 + 16 * h));
    const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(q1 + 16 * h));
    s.v[2 * h] = madd(s.v[2 * h], _mm256_unpacklo_epi16(w0, w1), pair);
    s.v[2 * h + 1] = madd(s.v[2 * h + 1], _mm256_unpackhi_epi16(w0, w1), pair);
  }
}

// out[0..32) += scale * sums + min, the sums of add_pair_words; min_lo for outputs 0..15, min_hi
// for 16..31 (equal but for Q2_K's skew).
inline void finish_words(float* out, const Sums& s, float scale, float min_lo, float min_hi) {
  const __m256 step = _mm256_set1_ps(scale);
  for (int h = 0; h < 2; ++h) {
    const __m256 min = _mm256_set1_ps(h == 0 ? min_lo : min_hi);
    const __m256i first = _mm256_permute2x128_si256(s.v[2 * h], s.v[2 * h + 1], 0x20);
    const __m256i second = _mm256_permute2x128_si256(s.v[2 * h], s.v[2 * h + 1], 0x31);
    float* o = out + 16 * h;
    _mm256_storeu_ps(o, _mm256_add_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(first), step, _mm256_loadu_ps(o)), min));
    _mm256_storeu_ps(o + 8,
                     _mm256_add_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(second), step, _mm256_loadu_ps(o + 8)), min));
  }
}

// out[0..32) += scale * (sums - correction).
inline void finish(float* out, const Sums& s, int32_t correction, float scale) {
  const __m256i c = _mm256_set1_epi32(correction);
  const __m256 step = _mm256_set1_ps(scale);
  for (int i = 0; i < 4; ++i) {
    const __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(s.v[i], c));
    _mm256_storeu_ps(out + 8 * i, _mm256_fmadd_ps(v, step, _mm256_loadu_ps(out + 8 * i)));
  }
}

}  // namespace ggl::GGL_ISA::transposed_steps
