// The integer GEMMs' path for a few activation columns (a decode step), written once for every
// instruction set: no panels, the weight rows are read straight from the matrix, one row after
// another. A sequential walk lets the hardware prefetcher stream the rows at close to the
// bandwidth of a plain read; interleaving several rows measured slower (docs/cpu-speed.md, "Decode
// rows"). A block's quants are unpacked once (Format::Steps::q4 / q8: 32 values in element order),
// Format::sums multiplies them by each column's block into 8 lane sums, and the block's scales
// apply to the 8 lanes at once: each lane takes an eighth of the zero point (Q4_0) or of the min
// times the block's sum (Q4_1).
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
#include "ggml-like/cpu/simd/row_walk.h"

namespace ggl::GGL_ISA::gemm_rows {

using namespace gemm_steps;

// The parts of a quantized column every Format's column has, per block b: the step (scale), the
// step times the sum of the block's integer values (offset: Q4_0's zero point 8 times it, spread
// over 8 lanes, is one offset per lane), the float sum of the activations (for Q4_1's min), and
// what Format::signed_sums leaves to subtract, an eighth per lane (Q8_0, where the set's
// Steps::kQ8UsesHiOffset), and (16-bit columns) the block's first-16 minus last-16 sum for
// Q2_K's skew (kquant_unpack.h).
struct BlockScales {
  const float* scale;
  const float* offset;
  const float* sum;
  const float* signed_offset;
  const float* skew_sum = nullptr;
};

// *out[c] = dot(row, column c) for C columns, the row of type kType (Q4_0, Q4_1 or Q8_0). Blocks
// alternate between two sets of accumulators (two independent FMA chains per column).
template <class Format, Type kType, int C>
void row_times_columns(const uint8_t* row, int64_t blocks, size_t block_bytes, const typename Format::Column* cols,
                       float* const* out) {
  using Steps = typename Format::Steps;
  constexpr bool kHasMin = kType == Type::Q4_1;
  constexpr size_t kQsOffset = (kHasMin ? 2 : 1) * sizeof(uint16_t);  // after d (and m)
  RowF acc[2][C];
  for (auto& set : acc)
    for (auto& a : set) a = rzero();
  // Inlined by force: GCC otherwise may leave it a call per block, which measured much slower
  // (docs/cpu-speed.md, "Decode rows").
  auto block = [&](int64_t b, RowF * into) __attribute__((always_inline)) {
    const uint8_t* blk = row + b * block_bytes;
    __builtin_prefetch(blk + row_walk::kPrefetchBytes);
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
  for (int c = 0; c < C; ++c) *out[c] = sum_lanes(radd(acc[0][c], acc[1][c]));
}

// IntGemm::multiply_rows for a Format (the walk: row_walk.h).
template <class Format>
void multiply_rows(Type t, const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, const void* const* columns,
                   float* const* y, int64_t n_cols) {
  const int64_t blocks = n / kQuantBlock;
  const size_t block_bytes = traits(t).block_bytes;
  using Column = typename Format::Column;
  auto view = [n](const void* p) { return Format::view(p, n); };
  auto walk = [&]<Type kType>() {
    row_walk::walk<Column>(w, row_stride, rows, columns, y, n_cols, view,
                           [&]<int C>(const uint8_t* row, const Column* cols, float* const* out) {
                             row_times_columns<Format, kType, C>(row, blocks, block_bytes, cols, out);
                           });
  };
  if (t == Type::Q4_1) {
    walk.template operator()<Type::Q4_1>();
  } else if (t == Type::Q8_0) {
    if constexpr (Format::kTakesQ8_0) walk.template operator()<Type::Q8_0>();
  } else {
    walk.template operator()<Type::Q4_0>();
  }
}

// *out[c] = dot(row, column c) for C columns, for the types a Kind unpacks into 32-value sub-blocks
// of 16-bit weights (value d * w + m per sub-block: cpu/arch/kquant_unpack.h): each weight
// block is unpacked once, in registers, and every sub-block's 8 lane sums (Format::unpacked_sums)
// are scaled by d times the column's step. Sub-blocks alternate between two sets of accumulators
// (two independent FMA chains per column: one chain through a super-block's 8 sub-blocks measured
// latency-bound). A super-block's 8 mins multiply the column's 8 block sums in one vector step
// (and Q2_K's 8 skews the 8 skew sums).
template <class Format, class Kind, int C>
void unpacked_row_times_columns(const uint8_t* row, int64_t blocks, const typename Format::Column* cols,
                                float* const* out) {
  constexpr int64_t kSubs = Kind::kValues / kQuantBlock;
  static_assert(kSubs == 1 || kSubs == kRowLanes, "a super-block's mins fill one vector");
  const auto* w = reinterpret_cast<const typename Kind::Block*>(row);
  RowF acc[2][C], min_acc[C];
  for (auto& set : acc)
    for (auto& a : set) a = rzero();
  for (auto& a : min_acc) a = rzero();
  // Block i's sub-block s takes accumulator set (s + odd) & 1, odd = i & 1 as a constant: blocks
  // of one sub-block alternate too, and every index stays known at compile time (registers).
  auto block = [&](int64_t i, int odd) __attribute__((always_inline)) {  // as above
    row_walk::prefetch_ahead<sizeof(typename Kind::Block)>(w + i);
    alignas(32) float mins[kSubs];
    Kind::unpack(
        w[i], [&](int s, const auto& weights, float d, float m) __attribute__((always_inline)) {
          const int64_t b = i * kSubs + s;
          RowF* into = acc[(s + odd) & 1];
          for (int c = 0; c < C; ++c)
            into[c] = rfmadd(rset1(d * cols[c].scales.scale[b]), rto_float(Format::unpacked_sums(weights, cols[c], b)),
                             into[c]);
          mins[s] = m;
        });
    if constexpr (Kind::kHasMin) {
      for (int c = 0; c < C; ++c) {
        const float* sums = cols[c].scales.sum + i * kSubs;
        min_acc[c] = kSubs == 1 ? rfmadd(rset1(mins[0] * (1.0f / kRowLanes)), rset1(sums[0]), min_acc[c])
                                : rfmadd(rload(mins), rload(sums), min_acc[c]);
      }
    }
    if constexpr (Kind::kHasSkew) {
      alignas(32) float skews[kSubs];
      Kind::skews(w[i], skews);
      for (int c = 0; c < C; ++c)
        min_acc[c] = rfmadd(rload(skews), rload(cols[c].scales.skew_sum + i * kSubs), min_acc[c]);
    }
  };
  int64_t i = 0;
  for (; i + 2 <= blocks; i += 2) {
    block(i, 0);
    block(i + 1, 1);
  }
  if (i < blocks) block(i, 0);
  for (int c = 0; c < C; ++c) *out[c] = sum_lanes(radd(radd(acc[0][c], acc[1][c]), min_acc[c]));
}

// IntGemm::multiply_rows for the types a Kind unpacks (the walk: row_walk.h).
template <class Format, class Kind>
void multiply_unpacked_rows(const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, const void* const* columns,
                            float* const* y, int64_t n_cols) {
  const int64_t blocks = n / Kind::kValues;
  using Column = typename Format::Column;
  row_walk::walk<Column>(
      w, row_stride, rows, columns, y, n_cols, [n](const void* p) { return Format::view(p, n); },
      [&]<int C>(const uint8_t* row, const Column* cols, float* const* out) {
        unpacked_row_times_columns<Format, Kind, C>(row, blocks, cols, out);
      });
}

}  // namespace ggl::GGL_ISA::gemm_rows
#endif
