// The integer GEMMs' decode path on interleaved rows (Q4_0_R8, Q8_0_R8, Q6_K_R8: interleaved.h),
// written once for the sets that have its steps (GGL_ROWS8: the x86 sets' gemm_rows8_x86.h). A
// vector's lane r is row r of a group of 8, so each block's scale conversion, unpacking and
// activation broadcasts serve 8 rows, and the lane sums are the rows' results: nothing is summed
// horizontally. (The plain rows path, gemm_rows.h, walks one row at a time and spends about as
// many instructions on each row as this does on 8, so it is compute-bound where this streams
// faster from DRAM: docs/cpu-speed.md, "Decode rows".)
//
// A Format has Column (with per-block scale[], the activations' step, and qsum[], the sum of the
// block's integer activations), view(column, n), Steps (gemm_rows8_steps::Quads, Bytes or Words:
// Weights, load(quads), Sum, zero(), total(sum)), kQuads (the 32-byte quads of 8 rows a block
// has: 4 for Q4_0, 8 for Q8_0), kZeroPoint (Q4_0's 8: it comes off as 8 times qsum, in integers,
// before the one conversion to float, so the sum is as exact as that of signed weights) and
// add(sum, weights, column, block, u) (the products of quad u of the block).
#pragma once
#include "ggml-like/cpu/simd/gemm_steps.h"
#include "ggml-like/core/types.h"
#include "ggml-like/cpu/interleaved.h"

namespace ggl::GGL_ISA::gemm_rows8 {
// Whether this set multiplies interleaved rows (the integer GEMMs then take the interleaved types).
#if GGL_ROWS8
inline constexpr bool kAvailable = true;
#else
inline constexpr bool kAvailable = false;
#endif
inline bool takes(Type t) { return kAvailable && is_interleaved(t); }
}  // namespace ggl::GGL_ISA::gemm_rows8

#if GGL_ROWS8
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "ggml-like/core/types.h"
#include "ggml-like/cpu/interleaved.h"
#include "ggml-like/cpu/simd/row_walk.h"

namespace ggl::GGL_ISA::gemm_rows8 {

namespace steps = gemm_rows8_steps;

inline constexpr int64_t kRows = kInterleavedRows;
inline constexpr size_t kScalesBytes = kRows * sizeof(uint16_t);
inline constexpr size_t kQuadBytes = kRows * 4;  // 4 bytes of each row
// The walk (row_walk.h) is one sequential stream; every line of it is prefetched a page ahead
// (row_walk::prefetch_ahead). One prefetch per block had measured slower than none on Zen 4 and
// on an earlier Xeon VM; every line measured V2-Lite Q4_0 decode 9.6-10.0 -> 14.2 t/s on a 2-core
// Xeon VM (docs/cpu-speed.md, "Decode rows: a prefetch for every line").

// y[c][0..8) = the group's 8 rows times column c, for C columns.
template <class Format, int C>
void group_times_columns(const uint8_t* group, int64_t blocks, const typename Format::Column* cols, float* const* y) {
  using Steps = typename Format::Steps;
  constexpr size_t kBlockBytes = kScalesBytes + Format::kQuads * kQuadBytes;
  steps::GroupF acc[C];
  for (auto& a : acc) a = steps::zero_rows();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = group + b * kBlockBytes;
    row_walk::prefetch_ahead<kBlockBytes>(blk);
    typename Steps::Sum sums[C];
    for (auto& s : sums) s = Steps::zero();
    for (int u = 0; u < Format::kQuads; ++u) {
      const typename Steps::Weights w = Steps::load(blk + kScalesBytes + u * kQuadBytes);
      for (int c = 0; c < C; ++c) sums[c] = Format::add(sums[c], w, cols[c], b, u);
    }
    const steps::GroupF d = steps::scales(blk);
    for (int c = 0; c < C; ++c) {
      steps::GroupI total = Steps::total(sums[c]);
      if constexpr (Format::kZeroPoint != 0) total = steps::minus_each(total, Format::kZeroPoint * cols[c].qsum[b]);
      acc[c] = steps::add_block(acc[c], d, total, cols[c].scale[b]);
    }
  }
  for (int c = 0; c < C; ++c) steps::store_rows(y[c], acc[c]);
}

// Q6_K_R8 (cpu/interleaved.h): y[c][0..8) = the group's 8 rows times column c, for C columns.
// Per super-block the rows' d; per 32-value sub-block (the column's block b) the Steps (Q6Quads)
// sum its two halves of 16 apart and scale them by the rows' scales in integers, then one
// conversion to float as for the 32-value types.
template <class Format, int C>
void superblocks_times_columns(const uint8_t* group, int64_t superblocks, const typename Format::Column* cols,
                               float* const* y) {
  using Steps = typename Format::Steps;
  constexpr int kSubBlocks = kSuperBlock / kQuantBlock;
  steps::GroupF acc[C];
  for (auto& a : acc) a = steps::zero_rows();
  for (int64_t sb = 0; sb < superblocks; ++sb) {
    const uint8_t* blk = group + sb * q6_k_r8::kGroupBytes;
    const steps::GroupF d = steps::scales(blk);
    for (int sub = 0; sub < kSubBlocks; ++sub) {
      const int64_t b = sb * kSubBlocks + sub;
      constexpr size_t kStep = q6_k_r8::kGroupBytes / kSubBlocks;  // the group's bytes in 8 equal steps
      row_walk::prefetch_ahead<kStep>(blk + sub * kStep);
      const uint8_t* quads = blk + q6_k_r8::kQuants + sub * q6_k_r8::kSubBlockBytes;
      const typename Steps::High high = Steps::high(quads + 4 * kQuadBytes);
      typename Steps::Sum sums[C];
      for (auto& s : sums) s = Steps::zero();
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) {
        const typename Steps::Weights w = Steps::load(quads + u * kQuadBytes, high, u);
        for (int c = 0; c < C; ++c) sums[c] = Format::add(sums[c], w, cols[c], b, u);
      }
      const uint8_t* scales = blk + q6_k_r8::kScales + 2 * sub * kRows;
      for (int c = 0; c < C; ++c)
        acc[c] = steps::add_block(acc[c], d, Steps::total(sums[c], scales, scales + kRows), cols[c].scale[b]);
    }
  }
  for (int c = 0; c < C; ++c) steps::store_rows(y[c], acc[c]);
}

// IntGemm::multiply_rows on an interleaved type (Format's): y[c][r] for r < rows (whole groups),
// c < n_cols; the groups are walked as plain rows are (row_walk.h), 8 rows a unit.
template <class Format>
void multiply_rows(const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, const void* const* columns,
                   float* const* y, int64_t n_cols) {
  using Column = typename Format::Column;
  const int64_t blocks = n / kQuantBlock;
  row_walk::walk<Column, kRows>(
      w, kRows * row_stride, rows / kRows, columns, y, n_cols, [n](const void* p) { return Format::view(p, n); },
      [&]<int C>(const uint8_t* group, const Column* cols, float* const* out) {
        if constexpr (Format::kSuperBlocks)
          superblocks_times_columns<Format, C>(group, n / kSuperBlock, cols, out);
        else
          group_times_columns<Format, C>(group, blocks, cols, out);
      });
}

}  // namespace ggl::GGL_ISA::gemm_rows8
#endif
