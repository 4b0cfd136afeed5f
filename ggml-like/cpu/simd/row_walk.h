// The walk of the integer rows paths (a decode step: a few activation columns, no panels), shared
// by every weight format: rows go a block of about 128 KiB at a time (it stays in L2) and every
// group of up to 4 columns walks the block before the next, one row after another (a sequential
// walk lets the hardware prefetcher stream the rows), so the weights come from memory once however
// many columns there are. What a row (or a unit of interleaved rows) times C columns is, is the
// caller's (gemm_rows.h for Q4_0/Q4_1/Q8_0, gemm_kquant.cpp for the K-quant, IQ4 and Q5 types,
// gemm_rows8.h for groups of 8 interleaved rows).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace ggl::GGL_ISA::row_walk {

inline constexpr int kMaxCols = 4;
inline constexpr size_t kRowBlockBytes = 128 * 1024;
// How far ahead of the block being multiplied a row's walk prefetches: covers the memory latency.
inline constexpr size_t kPrefetchBytes = 4096;

// Prefetches every cache line of the kBytes that lie kPrefetchBytes ahead of p (the block or
// blocks a step is about to multiply). Called once per step of a contiguous walk, so that the
// prefetched lines tile the stream: one prefetch per step, where a step is longer than a line,
// left the rest to the hardware prefetcher, which on a 2-core Xeon VM kept one core's Q4_K walk
// at 6.4 GB/s from DRAM against 11.7 with every line prefetched, and V2-Lite Q4_K_M decode at
// 7.4 t/s against 10.1 (docs/cpu-speed.md, "Decode rows: a prefetch for every line").
template <size_t kBytes>
inline void prefetch_ahead(const void* p) {
  constexpr size_t kLine = 64;
  const auto* ahead = static_cast<const uint8_t*>(p) + kPrefetchBytes;
  for (size_t o = 0; o < kBytes; o += kLine) __builtin_prefetch(ahead + o);
}

// y[c][r] for r < units * kUnitRows, c < n_cols, from `units` units of kUnitRows rows each,
// unit_stride bytes apart (a plain row, or a group of interleaved rows): view(columns[c]) makes a
// Column, and unit_times.template operator()<C>(unit, cols, out) writes out[c][0..kUnitRows) =
// the unit's rows times cols[c], for C columns (out[c] points into y[c]).
template <class Column, int64_t kUnitRows = 1, class View, class UnitTimes>
void walk(const uint8_t* w, size_t unit_stride, int64_t units, const void* const* columns, float* const* y,
          int64_t n_cols, View view, UnitTimes unit_times) {
  const int64_t block_units = std::max<int64_t>(1, static_cast<int64_t>(kRowBlockBytes / unit_stride));
  Column cols[kMaxCols];
  for (int64_t u0 = 0; u0 < units; u0 += block_units) {
    const int64_t u1 = std::min(units, u0 + block_units);
    for (int64_t c0 = 0; c0 < n_cols; c0 += kMaxCols) {
      const int nc = static_cast<int>(std::min<int64_t>(kMaxCols, n_cols - c0));
      for (int c = 0; c < nc; ++c) cols[c] = view(columns[c0 + c]);
      auto rows_of = [&]<int C>() {
        for (int64_t u = u0; u < u1; ++u) {
          float* out[C];
          for (int c = 0; c < C; ++c) out[c] = y[c0 + c] + u * kUnitRows;
          unit_times.template operator()<C>(w + u * unit_stride, cols, out);
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
