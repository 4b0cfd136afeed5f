// Pieces shared by the integer GEMMs (gemm_int16.cpp, gemm_int8.cpp), which differ only in how a
// block's integer sums are formed: reading block scales of 16 rows into a vector, storing a
// 32-row tile, and walking the activation columns in register tiles. AVX-512 builds only.
#pragma once
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#define GGL_INT_GEMM 1
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "ggml-like/quant/quant.h"
#include "ggml-like/core/types.h"
#include "ggml-like/cpu/arch/x86/x86_intrinsics.h"

namespace ggl::GGL_ISA::gemm_panel {

inline constexpr int64_t kLanes = 16;  // rows per vector; a panel is two vectors of rows
inline constexpr int kMaxCols = 6;     // activation columns per register tile

// Lane r: the fp16 at `base + offsets[r]` as a float; lanes outside `valid` are 0. (Gathers 32
// bits, so the two bytes after the fp16 must be readable: they are the rest of the block.)
inline __m512 gather_f16(const uint8_t* base, __m512i offsets, __mmask16 valid) {
  const __m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, offsets, base, 1);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));
}

// The 16 quant bytes of 16 rows' 4-bit blocks (qs[r]), four rows per vector: z[i] holds rows
// 4i..4i+3, one per 128-bit lane.
inline void load_q4_rows(const uint8_t* const* qs, __m512i* z) {
  for (int i = 0; i < 4; ++i) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs[4 * i])));
    for (int l = 1; l < 4; ++l)
      v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs[4 * i + l])), l);
    z[i] = v;
  }
}

// One 32-value block of an activation column rounded to `levels` steps each side of zero: its
// values as two vectors of int32, the scale (a step: amax / levels) and the float sum. An
// all-zero block gets scale 0 and zero quants.
struct QuantizedBlock {
  __m512i lo, hi;
  float scale, sum;
};
inline QuantizedBlock quantize_block(const float* x, float levels) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + kLanes);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const __m512 k = _mm512_set1_ps(amax > 0.0f ? levels / amax : 0.0f);
  return {_mm512_cvtps_epi32(_mm512_mul_ps(v0, k)), _mm512_cvtps_epi32(_mm512_mul_ps(v1, k)), amax / levels,
          _mm512_reduce_add_ps(_mm512_add_ps(v0, v1))};
}

// Byte offsets of rows [0, 16) of lane group g (rows past `rows` read row 0) and their mask.
struct GroupRows {
  __m512i offsets;
  __mmask16 valid;
  int64_t count;
};
inline GroupRows group_rows(int64_t g, int64_t rows, size_t row_stride) {
  GroupRows r;
  r.count = std::clamp<int64_t>(rows - g * kLanes, 0, kLanes);
  r.valid = static_cast<__mmask16>((1u << r.count) - 1);
  alignas(64) int32_t offsets[kLanes];
  for (int64_t i = 0; i < kLanes; ++i) offsets[i] = static_cast<int32_t>(i < r.count ? i * row_stride : 0);
  r.offsets = _mm512_load_si512(offsets);
  return r;
}

// Panel layout, per block of 32 weights: two lane groups of Format::kSteps vectors, then the 32
// rows' scales and mins as floats.
template <class Format>
struct PanelBlock {
  static constexpr size_t kGroupBytes = Format::kSteps * 64;
  static constexpr size_t kScalesOffset = 2 * kGroupBytes;
  static constexpr size_t kMinsOffset = kScalesOffset + 2 * kLanes * sizeof(float);
  static constexpr size_t kBytes = kMinsOffset + 2 * kLanes * sizeof(float);
};

// Register tile: 32 panel rows (two vectors of 16 lanes) by C columns. Each block's integer sums
// start at Format::start (the zero point's share, or 0), add one Format::dot per step, and are
// scaled into the float sums once per block; kHasMin adds each row's min times the block's sum.
template <class Format, bool kHasMin>
struct Tile {
  using Column = typename Format::Column;
  using Block = PanelBlock<Format>;
  const uint8_t* panel;
  int64_t blocks;
  int32_t zero_point;

  template <int C>
  void run(const Column* cols, __m512 (*out)[C]) const {
    __m512 acc[2][C];
    for (int g = 0; g < 2; ++g)
      for (int c = 0; c < C; ++c) acc[g][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* pb = panel + b * Block::kBytes;
      __m512i isum[2][C];
      for (int c = 0; c < C; ++c) isum[0][c] = isum[1][c] = _mm512_set1_epi32(Format::start(cols[c], b, zero_point));
      for (int j = 0; j < Format::kSteps; ++j) {
        const __m512i w0 = _mm512_load_si512(pb + j * 64);
        const __m512i w1 = _mm512_load_si512(pb + Block::kGroupBytes + j * 64);
        for (int c = 0; c < C; ++c) {
          const __m512i x = _mm512_set1_epi32(Format::word(cols[c], b, j));
          isum[0][c] = Format::dot(isum[0][c], w0, x);
          isum[1][c] = Format::dot(isum[1][c], w1, x);
        }
      }
      const auto* scales = reinterpret_cast<const float*>(pb + Block::kScalesOffset);
      const __m512 d0 = _mm512_load_ps(scales), d1 = _mm512_load_ps(scales + kLanes);
      for (int c = 0; c < C; ++c) {
        const __m512 s = _mm512_set1_ps(cols[c].scale[b]);
        acc[0][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[0][c]), _mm512_mul_ps(d0, s), acc[0][c]);
        acc[1][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[1][c]), _mm512_mul_ps(d1, s), acc[1][c]);
      }
      if constexpr (kHasMin) {
        const auto* mins = reinterpret_cast<const float*>(pb + Block::kMinsOffset);
        const __m512 m0 = _mm512_load_ps(mins), m1 = _mm512_load_ps(mins + kLanes);
        for (int c = 0; c < C; ++c) {
          const __m512 s = _mm512_set1_ps(cols[c].sum[b]);
          acc[0][c] = _mm512_fmadd_ps(m0, s, acc[0][c]);
          acc[1][c] = _mm512_fmadd_ps(m1, s, acc[1][c]);
        }
      }
    }
    for (int g = 0; g < 2; ++g)
      for (int c = 0; c < C; ++c) out[g][c] = acc[g][c];
  }
};

// Runs Tile::template run<C>(cols, out) for every register tile of columns and stores the 32-row
// results: y[c][r] for r < rows.
template <class Tile, class Column>
void multiply_columns(const Tile& tile, int64_t rows, const Column* cols, float* const* y, int64_t n_cols) {
  auto run = [&]<int C>(int64_t c0) {
    __m512 out[2][C];
    tile.template run<C>(cols + c0, out);
    for (int g = 0; g < 2; ++g) {
      const int64_t valid = std::clamp<int64_t>(rows - g * kLanes, 0, kLanes);
      if (valid == 0) break;
      const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
      for (int c = 0; c < C; ++c) _mm512_mask_storeu_ps(y[c0 + c] + g * kLanes, mask, out[g][c]);
    }
  };
  int64_t c0 = 0;
  for (; c0 + kMaxCols <= n_cols; c0 += kMaxCols) run.template operator()<kMaxCols>(c0);
  switch (n_cols - c0) {
    case 1: return run.template operator()<1>(c0);
    case 2: return run.template operator()<2>(c0);
    case 3: return run.template operator()<3>(c0);
    case 4: return run.template operator()<4>(c0);
    case 5: return run.template operator()<5>(c0);
    default: return;
  }
}

// IntGemm::pack_panel for a Format: per block and lane group, the 16 rows' scales (and Q4_1's
// mins) gathered into vectors, and Format::pack_group(t, qs, out) writing the group's step vectors
// from the 16 rows' quants (qs[r]: row r's quants; past `rows`, zeros).
template <class Format>
void pack_panel(Type t, const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, void* panel) {
  using Block = PanelBlock<Format>;
  const size_t block_bytes = traits(t).block_bytes;
  const size_t qs_offset = (t == Type::Q4_1 ? 2 : 1) * sizeof(uint16_t);  // after d (and m)
  static const uint8_t zeros[kQuantBlock] = {};
  auto* out = static_cast<uint8_t*>(panel);
  for (int64_t g = 0; g < 2; ++g) {
    const GroupRows group = group_rows(g, rows, row_stride);
    const uint8_t* first = w + g * kLanes * row_stride;
    for (int64_t b = 0; b < n / kQuantBlock; ++b) {
      uint8_t* pb = out + b * Block::kBytes;
      const uint8_t* blocks = first + b * block_bytes;
      _mm512_store_ps(pb + Block::kScalesOffset + g * kLanes * sizeof(float),
                      gather_f16(blocks, group.offsets, group.valid));
      _mm512_store_ps(pb + Block::kMinsOffset + g * kLanes * sizeof(float),
                      t == Type::Q4_1 ? gather_f16(blocks + sizeof(uint16_t), group.offsets, group.valid)
                                      : _mm512_setzero_ps());
      const uint8_t* qs[kLanes];
      for (int64_t r = 0; r < kLanes; ++r) qs[r] = r < group.count ? blocks + r * row_stride + qs_offset : zeros;
      Format::pack_group(t, qs, pb + g * Block::kGroupBytes);
    }
  }
}

// IntGemm::multiply_panel for a Format: the columns viewed 64 at a time, Q4_1 with its mins.
template <class Format>
void multiply_panel(Type t, const void* panel, int64_t rows, int64_t n, const void* const* columns, float* const* y,
                    int64_t n_cols) {
  constexpr int64_t kBatch = 64;
  typename Format::Column cols[kBatch];
  const auto* p = static_cast<const uint8_t*>(panel);
  const int64_t blocks = n / kQuantBlock;
  const int32_t zero_point = Format::zero_point(t);
  for (int64_t c0 = 0; c0 < n_cols; c0 += kBatch) {
    const int64_t count = std::min(kBatch, n_cols - c0);
    for (int64_t c = 0; c < count; ++c) cols[c] = Format::view(columns[c0 + c], n);
    if (t == Type::Q4_1)
      multiply_columns(Tile<Format, true>{p, blocks, zero_point}, rows, cols, y + c0, count);
    else
      multiply_columns(Tile<Format, false>{p, blocks, zero_point}, rows, cols, y + c0, count);
  }
}

}  // namespace ggl::GGL_ISA::gemm_panel
#endif
