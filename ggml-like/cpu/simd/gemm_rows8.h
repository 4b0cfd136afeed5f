// The integer GEMMs' decode path on interleaved rows (Q4_0_R8, quant/interleaved.h), written once
// for the sets that have its steps (GGL_ROWS8: the x86 sets' gemm_rows8_x86.h). A vector's lane
// r is row r of a group of 8, so each block's scale conversion, nibble split and activation
// broadcasts serve 8 rows, and the lane sums are the rows' results: nothing is summed
// horizontally. (The plain rows path, gemm_rows.h, walks one row at a time and spends about as
// many instructions on each row as this does on 8: compute-bound at ~13-18 GB/s per core, where
// this streams ~19-23 GB/s from DRAM on one Zen 4 core, docs/cpu-speed.md.)
//
// A Format has Column, view(column, n), Steps (gemm_rows8_steps::Quads or Bytes), add(sum,
// nibbles, column, block, u) (the products of quads u of the block's low and high nibbles),
// scale(column, block) (the activations' step) and qsum(column, block) (the sum of the block's
// integer activations: Q4_0's zero point 8 comes off as 8 of them, in integers, before the one
// conversion to float, so the sum is as exact as that of signed weights).
#pragma once
#include "ggml-like/cpu/simd/gemm_steps.h"
#include "ggml-like/core/types.h"

namespace ggl::GGL_ISA::gemm_rows8 {
// Whether this set multiplies interleaved rows (the integer GEMMs then take Q4_0_R8).
#if GGL_ROWS8
inline constexpr bool kAvailable = true;
#else
inline constexpr bool kAvailable = false;
#endif
inline bool takes(Type t) { return kAvailable && t == Type::Q4_0_R8; }
}  // namespace ggl::GGL_ISA::gemm_rows8

#if GGL_ROWS8
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "ggml-like/core/types.h"
#include "ggml-like/quant/interleaved.h"

namespace ggl::GGL_ISA::gemm_rows8 {

namespace steps = gemm_rows8_steps;

inline constexpr int64_t kRows = kInterleavedRows;
inline constexpr size_t kScalesBytes = kRows * sizeof(uint16_t);
inline constexpr size_t kBlockBytes = kRows * (sizeof(uint16_t) + kQuantBlock / 2);  // 144
inline constexpr int kQuads = kQuantBlock / 8;                                         // per half
inline constexpr int kMaxCols = 4;
// Groups a walk takes before the next columns (about 128 KiB of weights, which stay in L2). The
// walk is one sequential stream that the hardware prefetcher follows: a software prefetch 1-8 KiB
// ahead measured 5-12% slower decode (Zen 4, two threads), none at all the fastest.
inline constexpr size_t kWalkBytes = 128 * 1024;

// y[c][0..8) = the group's 8 rows times column c, for C columns.
template <class Format, int C>
void group_times_columns(const uint8_t* group, int64_t blocks, const typename Format::Column* cols, float* const* y) {
  using Steps = typename Format::Steps;
  __m256 acc[C];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = group + b * kBlockBytes;
    typename Steps::Sum sums[C];
    for (auto& s : sums) s = Steps::zero();
    for (int u = 0; u < kQuads; ++u) {
      const steps::Nibbles w = steps::nibbles(blk + kScalesBytes + u * kRows * 4);
      for (int c = 0; c < C; ++c) sums[c] = Format::add(sums[c], w, cols[c], b, u);
    }
    const __m256 d = steps::scales(blk);
    for (int c = 0; c < C; ++c) {
      const __m256i total = _mm256_sub_epi32(Steps::total(sums[c]), _mm256_set1_epi32(8 * Format::qsum(cols[c], b)));
      const __m256 dot = _mm256_mul_ps(_mm256_cvtepi32_ps(total), _mm256_set1_ps(Format::scale(cols[c], b)));
      acc[c] = _mm256_fmadd_ps(d, dot, acc[c]);
    }
  }
  for (int c = 0; c < C; ++c) _mm256_storeu_ps(y[c], acc[c]);
}

// IntGemm::multiply_rows on Q4_0_R8: y[c][r] for r < rows (whole groups), c < n_cols. The groups
// go ~128 KiB at a time, each walked by every group of up to 4 columns, so the weights come from
// memory once however many columns there are.
template <class Format>
void multiply_rows(const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, const void* const* columns,
                   float* const* y, int64_t n_cols) {
  using Column = typename Format::Column;
  const int64_t blocks = n / kQuantBlock, groups = rows / kRows;
  const size_t group_stride = kRows * row_stride;
  const int64_t walk = std::max<int64_t>(1, static_cast<int64_t>(kWalkBytes / group_stride));
  Column cols[kMaxCols];
  for (int64_t g0 = 0; g0 < groups; g0 += walk) {
    const int64_t g1 = std::min(groups, g0 + walk);
    for (int64_t c0 = 0; c0 < n_cols; c0 += kMaxCols) {
      const int nc = static_cast<int>(std::min<int64_t>(kMaxCols, n_cols - c0));
      for (int c = 0; c < nc; ++c) cols[c] = Format::view(columns[c0 + c], n);
      auto groups_of = [&]<int C>() {
        for (int64_t g = g0; g < g1; ++g) {
          float* out[C];
          for (int c = 0; c < C; ++c) out[c] = y[c0 + c] + g * kRows;
          group_times_columns<Format, C>(w + g * group_stride, blocks, cols, out);
        }
      };
      switch (nc) {
        case 1: groups_of.template operator()<1>(); break;
        case 2: groups_of.template operator()<2>(); break;
        case 3: groups_of.template operator()<3>(); break;
        default: groups_of.template operator()<4>(); break;
      }
    }
  }
}

}  // namespace ggl::GGL_ISA::gemm_rows8
#endif
