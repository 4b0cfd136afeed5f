// The integer GEMMs' path for a few activation columns (a decode step): no panels, the weight
// rows are read straight from the matrix, one row after another. A sequential walk lets the
// hardware prefetcher stream the rows at close to the bandwidth of a plain read (interleaving
// several rows measured ~25% slower). A block's 16 quant bytes become its 32 nibbles, in element
// order, in one 256-bit vector; Format::sums multiplies them by the column's block into 8 lane
// sums, and the block's scales apply to the 8 lanes at once: each lane takes an eighth of the
// zero point (Q4_0) or of the min times the block's sum (Q4_1). The lanes are summed once per row.
// Q8_0's 32 signed bytes go to Format::signed_sums as they are, where a Format takes them
// (Format::kTakesQ8_0). AVX-512 (VL, VNNI) builds only; see gemm_panel.h.
#pragma once
#include "ggml-like/cpu/arch/x86/avx512/gemm_panel.h"
#if GGL_INT_GEMM
#include <cstring>

namespace ggl::GGL_ISA::gemm_rows {

// The parts of a quantized column every Format's column has, per block b: the step (scale), the
// step times the sum of the block's integer values (offset: Q4_0's zero point 8 times it, spread
// over 8 lanes, is one offset per lane), and the float sum of the activations (for Q4_1's min).
struct BlockScales {
  const float* scale;
  const float* offset;
  const float* sum;
  const float* signed_offset;  // what Format::signed_sums adds, an eighth per lane (Q8_0 only)
};

// Prefetch distance along the row walk: far enough to cover the memory latency.
inline constexpr size_t kPrefetchBytes = 2048;

// The 32 nibbles of a 4-bit block's 16 quant bytes (element i low in byte i, element 16 + i high),
// as bytes in element order.
inline __m256i q4_nibbles(const uint8_t* qs) {
  const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m256i shifts = _mm256_setr_epi16(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4);
  return _mm256_and_si256(_mm256_srlv_epi16(both, shifts), _mm256_set1_epi8(0x0F));
}

inline __m256 broadcast_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h)));
}

inline float sum_lanes(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// out[c] = dot(row, column c) for C columns, the row of type kType (Q4_0, Q4_1 or Q8_0). Blocks
// alternate between two sets of accumulators (two independent FMA chains per column).
template <class Format, Type kType, int C>
void row_times_columns(const uint8_t* row, int64_t blocks, size_t block_bytes, const typename Format::Column* cols,
                       float* out) {
  constexpr bool kHasMin = kType == Type::Q4_1;
  constexpr size_t kQsOffset = (kHasMin ? 2 : 1) * sizeof(uint16_t);  // after d (and m)
  __m256 acc[2][C];
  for (auto& set : acc)
    for (auto& a : set) a = _mm256_setzero_ps();
  auto block = [&](int64_t b, __m256* into) {
    const uint8_t* blk = row + b * block_bytes;
    __builtin_prefetch(blk + kPrefetchBytes);
    const __m256 d = broadcast_f16(blk);
    __m256i w;
    if constexpr (kType == Type::Q8_0)
      w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQsOffset));
    else
      w = q4_nibbles(blk + kQsOffset);
    for (int c = 0; c < C; ++c) {
      const BlockScales& s = cols[c].scales;
      __m256i sums;
      __m256 offset;
      if constexpr (kType == Type::Q8_0) {
        sums = Format::signed_sums(w, cols[c], b);
        offset = _mm256_set1_ps(s.signed_offset[b]);
      } else {
        sums = Format::sums(w, cols[c], b);
        offset = kHasMin ? _mm256_setzero_ps() : _mm256_set1_ps(s.offset[b]);
      }
      const __m256 dot = _mm256_fmsub_ps(_mm256_cvtepi32_ps(sums), _mm256_set1_ps(s.scale[b]), offset);
      into[c] = _mm256_fmadd_ps(d, dot, into[c]);
    }
    if constexpr (kHasMin) {
      const __m256 m = broadcast_f16(blk + sizeof(uint16_t));
      for (int c = 0; c < C; ++c)
        into[c] = _mm256_fmadd_ps(m, _mm256_set1_ps(cols[c].scales.sum[b] * 0.125f), into[c]);
    }
  };
  int64_t b = 0;
  for (; b + 2 <= blocks; b += 2) {
    block(b, acc[0]);
    block(b + 1, acc[1]);
  }
  if (b < blocks) block(b, acc[0]);
  for (int c = 0; c < C; ++c) out[c] = sum_lanes(_mm256_add_ps(acc[0][c], acc[1][c]));
}

// IntGemm::multiply_rows for a Format. Rows go a block of about 128 KiB at a time (it stays in L2)
// and every group of up to 4 columns walks the block before the next: the weights come from memory
// once however many columns there are.
template <class Format>
void multiply_rows(Type t, const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, const void* const* columns,
                   float* const* y, int64_t n_cols) {
  constexpr int kMaxCols = 4;
  constexpr size_t kRowBlockBytes = 128 * 1024;
  const int64_t blocks = n / kQuantBlock;
  const size_t block_bytes = traits(t).block_bytes;
  const int64_t block_rows = std::max<int64_t>(1, static_cast<int64_t>(kRowBlockBytes / row_stride));
  typename Format::Column cols[kMaxCols];
  float out[kMaxCols];
  for (int64_t r0 = 0; r0 < rows; r0 += block_rows) {
    const int64_t r1 = std::min(rows, r0 + block_rows);
    for (int64_t c0 = 0; c0 < n_cols; c0 += kMaxCols) {
      const int nc = static_cast<int>(std::min<int64_t>(kMaxCols, n_cols - c0));
      for (int c = 0; c < nc; ++c) cols[c] = Format::view(columns[c0 + c], n);
      auto walk = [&]<Type kType, int C>() {
        for (int64_t r = r0; r < r1; ++r) {
          row_times_columns<Format, kType, C>(w + r * row_stride, blocks, block_bytes, cols, out);
          for (int c = 0; c < C; ++c) y[c0 + c][r] = out[c];
        }
      };
      auto by_count = [&]<Type kType>() {
        switch (nc) {
          case 1: return walk.template operator()<kType, 1>();
          case 2: return walk.template operator()<kType, 2>();
          case 3: return walk.template operator()<kType, 3>();
          default: return walk.template operator()<kType, 4>();
        }
      };
      if (t == Type::Q4_1) {
        by_count.template operator()<Type::Q4_1>();
      } else if (t == Type::Q8_0) {
        if constexpr (Format::kTakesQ8_0) by_count.template operator()<Type::Q8_0>();
      } else {
        by_count.template operator()<Type::Q4_0>();
      }
    }
  }
}

}  // namespace ggl::GGL_ISA::gemm_rows
#endif
