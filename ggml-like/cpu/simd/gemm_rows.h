// The integer GEMMs' path for a few activation columns (a decode step), written once for every
// instruction set: no panels, the weight rows are read straight from the matrix, one row after
// another. A sequential walk lets the hardware prefetcher stream the rows at close to the
// bandwidth of a plain read (interleaving several rows measured ~25% slower). A block's quants are
// unpacked once (Format::Steps::q4 / q8: 32 values in element order), Format::sums multiplies them
// by each column's block into 8 lane sums, and the block's scales apply to the 8 lanes at once:
// each lane takes an eighth of the zero point (Q4_0) or of the min times the block's sum (Q4_1).
// The lanes are summed once per row. Q8_0 goes to Format::signed_sums where a Format takes it
// (Format::kTakesQ8_0). The float lane ops (RowF, rfmadd, ...) come from the set's gemm_steps.h.
#pragma once
#include "ggml-like/cpu/simd/gemm_steps.h"
#if GGL_INT_GEMM
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "ggml-like/core/types.h"
#include "ggml-like/quant/quant.h"

namespace ggl::GGL_ISA::gemm_rows {

using namespace gemm_steps;

// The parts of a quantized column every Format's column has, per block b: the step (scale), the
// step times the sum of the block's integer values (offset: Q4_0's zero point 8 times it, spread
// over 8 lanes, is one offset per lane), the float sum of the activations (for Q4_1's min), and
// what Format::signed_sums leaves to subtract, an eighth per lane (Q8_0, where the set's
// Steps::kQ8UsesHiOffset).
struct BlockScales {
  const float* scale;
  const float* offset;
  const float* sum;
  const float* signed_offset;
};

// Prefetch distance along the row walk: far enough to cover the memory latency.
inline constexpr size_t kPrefetchBytes = 2048;

// out[c] = dot(row, column c) for C columns, the row of type kType (Q4_0, Q4_1 or Q8_0). Blocks
// alternate between two sets of accumulators (two independent FMA chains per column).
template <class Format, Type kType, int C>
void row_times_columns(const uint8_t* row, int64_t blocks, size_t block_bytes, const typename Format::Column* cols,
                       float* out) {
  using Steps = typename Format::Steps;
  constexpr bool kHasMin = kType == Type::Q4_1;
  constexpr size_t kQsOffset = (kHasMin ? 2 : 1) * sizeof(uint16_t);  // after d (and m)
  RowF acc[2][C];
  for (auto& set : acc)
    for (auto& a : set) a = rzero();
  auto block = [&](int64_t b, RowF* into) {
    const uint8_t* blk = row + b * block_bytes;
    __builtin_prefetch(blk + kPrefetchBytes);
    const RowF d = broadcast_f16(blk);
    typename Steps::Weights w;
    if constexpr (kType == Type::Q8_0)
      w = Steps::q8(blk + kQsOffset);
    else
      w = Steps::q4(blk + kQsOffset);
    for (int c = 0; c < C; ++c) {
      const BlockScales& s = cols[c].scales;
      RowF dot;
      if constexpr (kType == Type::Q8_0) {
        const RowF sums = rto_float(Format::signed_sums(w, cols[c], b));
        if constexpr (Steps::kQ8UsesHiOffset)
          dot = rfmsub(sums, rset1(s.scale[b]), rset1(s.signed_offset[b]));
        else
          dot = rmul(sums, rset1(s.scale[b]));
      } else {
        const RowF offset = kHasMin ? rzero() : rset1(s.offset[b]);
        dot = rfmsub(rto_float(Format::sums(w, cols[c], b)), rset1(s.scale[b]), offset);
      }
      into[c] = rfmadd(d, dot, into[c]);
    }
    if constexpr (kHasMin) {
      const RowF m = broadcast_f16(blk + sizeof(uint16_t));
      for (int c = 0; c < C; ++c) into[c] = rfmadd(m, rset1(cols[c].scales.sum[b] * 0.125f), into[c]);
    }
  };
  int64_t b = 0;
  for (; b + 2 <= blocks; b += 2) {
    block(b, acc[0]);
    block(b + 1, acc[1]);
  }
  if (b < blocks) block(b, acc[0]);
  for (int c = 0; c < C; ++c) out[c] = sum_lanes(radd(acc[0][c], acc[1][c]));
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
