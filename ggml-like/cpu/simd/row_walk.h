// The walk of the integer rows paths (a decode step: a few activation columns, no panels), shared
// by every weight format: rows go a block of about 128 KiB at a time (it stays in L2) and every
// group of up to 4 columns walks the block before the next, one row after another (a sequential
// walk lets the hardware prefetcher stream the rows), so the weights come from memory once however
// many columns there are. What a row times C columns is, is the caller's (gemm_rows.h for
// Q4_0/Q4_1/Q8_0, gemm_kquant.cpp for the K-quant, IQ4 and Q5 types).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace ggl::GGL_ISA::row_walk {

inline constexpr int kMaxCols = 4;
inline constexpr size_t kRowBlockBytes = 128 * 1024;
// How far ahead of the block being multiplied a row's walk prefetches: covers the memory latency.
inline constexpr size_t kPrefetchBytes = 2048;

// y[c][r] for r < rows, c < n_cols: view(columns[c]) makes a Column, and
// row_times.template operator()<C>(row, cols, out) writes out[c] = dot(row, cols[c]) for C columns.
template <class Column, class View, class RowTimes>
void walk(const uint8_t* w, size_t row_stride, int64_t rows, const void* const* columns, float* const* y,
          int64_t n_cols, View view, RowTimes row_times) {
  const int64_t block_rows = std::max<int64_t>(1, static_cast<int64_t>(kRowBlockBytes / row_stride));
  Column cols[kMaxCols];
  float out[kMaxCols];
  for (int64_t r0 = 0; r0 < rows; r0 += block_rows) {
    const int64_t r1 = std::min(rows, r0 + block_rows);
    for (int64_t c0 = 0; c0 < n_cols; c0 += kMaxCols) {
      const int nc = static_cast<int>(std::min<int64_t>(kMaxCols, n_cols - c0));
      for (int c = 0; c < nc; ++c) cols[c] = view(columns[c0 + c]);
      auto rows_of = [&]<int C>() {
        for (int64_t r = r0; r < r1; ++r) {
          row_times.template operator()<C>(w + r * row_stride, cols, out);
          for (int c = 0; c < C; ++c) y[c0 + c][r] = out[c];
        }
      };
      switch (nc) {
        case 1: rows_of.template operator()<1>(); break;
        case 2: rows_of.template operator()<2>(); break;
        case 3: rows_of.template operator()<3>(); break;
        default: rows_of.template operator()<4>(); break;
      }
    }
  }
}

}  // namespace ggl::GGL_ISA::row_walk
