// The integer GEMMs' panel path (int_gemm.h), written once for every instruction set: the panel
// layout and its packing walk, the register tile and the walk over activation columns. What an
// instruction set supplies are the innermost steps (gemm_steps.h: vector width, the dot step,
// the transposes that unpack a group of rows, gathers and masked stores; the plain vector
// arithmetic is xsimd); what a format supplies
// (gemm_int16.cpp, gemm_int8.cpp) is its column layout, its dot step and how it unpacks weights.
//
// A Format has: Column (with per-block float scale[] and sum[]), Dot (the set's Pairs or Quads:
// Sum zero(), Sum add(Sum, w, x), VecI total(Sum)), kSteps (dot steps per block of 32 weights),
// kHasStart (whether a block's integer sum starts at start(), not 0), view(column, n),
// zero_point(type), start(column, block, zero_point), word(column, block, step) (the 32-bit
// activation word a step broadcasts) and pack_group(type, qs, out) (a lane group's kSteps vectors
// from its rows' quants qs[r]). Where a set takes the types unpacked to 16-bit weights
// (pack_unpacked_panel), its Pairs also has pack_words(w, out): the 16 pair vectors of a lane
// group from its kLanes rows' 32 int16 weights w[r][32].
#pragma once
#include "ggml-like/cpu/simd/gemm_steps.h"
#if GGL_INT_GEMM
#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "ggml-like/core/types.h"
#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/cpu/arch/avx512_undefined.h"
#include "ggml-like/core/fp16.h"
#include "ggml-like/cpu/interleaved.h"
#include "ggml-like/quant/quant.h"

namespace ggl::GGL_ISA::gemm_panel {

using gemm_steps::kLanes;
// Vectors of one lane per row: the plain arithmetic in xsimd (its widest batch for the set the
// copy is compiled for), handed to the set's steps as the native registers they convert to.
using VecF = xsimd::batch<float>;
using VecI = xsimd::batch<int32_t>;
static_assert(VecF::size == kLanes, "xsimd's widest batch has the steps' lanes");

// Lane groups (vectors of rows) per panel, and per register tile.
inline constexpr int64_t kGroups = kIntGemmPanelRows / kLanes;
inline constexpr int kTileVecs = gemm_steps::kTileVecs;
static_assert(kIntGemmPanelRows % (kLanes * kTileVecs) == 0, "a panel is whole register tiles");

// One 32-value block of an activation column rounded to `levels` steps each side of zero: its
// integers, the scale (a step: amax / levels), the float sum, and the sum of its first 16 values
// minus that of its last 16 (skew: for weights with a min per 16, Q2_K). An all-zero block gets scale 0
// and zero quants. In xsimd's vectors of the set's width (plain loops stayed scalar: float max and
// sum reductions do not vectorize without reassociation, and took ~7% of a prefill).
struct QuantizedBlock {
  alignas(64) int32_t q[kQuantBlock];
  float scale, sum, skew;
};
inline QuantizedBlock quantize_block(const float* x, float levels) {
  using Floats = xsimd::batch<float>;
  constexpr int64_t kWidth = Floats::size;
  static_assert(kQuantBlock % kWidth == 0);
  QuantizedBlock out;
  static_assert(kQuantBlock / 2 % kWidth == 0, "a vector lies in one half of the block");
  Floats amax(0.0f), sum(0.0f), first(0.0f);
  for (int64_t i = 0; i < kQuantBlock; i += kWidth) {
    const Floats v = Floats::load_unaligned(x + i);
    GGL_AVX512_UNDEFINED_BEGIN
    amax = xsimd::max(amax, xsimd::abs(v));
    GGL_AVX512_UNDEFINED_END
    sum += v;
    if (i < kQuantBlock / 2) first += v;
  }
  alignas(64) float lanes[kWidth];
  amax.store_aligned(lanes);
  const float a = *std::max_element(lanes, lanes + kWidth);
  const Floats k(a > 0.0f ? levels / a : 0.0f);
  GGL_AVX512_UNDEFINED_BEGIN
  for (int64_t i = 0; i < kQuantBlock; i += kWidth)
    xsimd::nearbyint_as_int(Floats::load_unaligned(x + i) * k).store_aligned(out.q + i);
  GGL_AVX512_UNDEFINED_END
  out.scale = a / levels;
  out.sum = xsimd::hadd(sum);
  out.skew = 2.0f * xsimd::hadd(first) - out.sum;
  return out;
}

// Panel layout, per block of 32 weights: kGroups lane groups of Format::kSteps vectors, then the
// 32 rows' scales, mins and skews (Q2_K: + skew on the block's first 16 values, - on its last 16)
// as floats.
template <class Format>
struct PanelBlock {
  static constexpr size_t kVecBytes = kLanes * sizeof(int32_t);
  static constexpr size_t kGroupBytes = Format::kSteps * kVecBytes;
  static constexpr size_t kScalesOffset = kGroups * kGroupBytes;
  static constexpr size_t kMinsOffset = kScalesOffset + kIntGemmPanelRows * sizeof(float);
  static constexpr size_t kSkewsOffset = kMinsOffset + kIntGemmPanelRows * sizeof(float);
  static constexpr size_t kBytes = kSkewsOffset + kIntGemmPanelRows * sizeof(float);
};

// Register tile: kTileVecs lane groups of the panel (from group g0) by C columns. Each block's
// integer sums start at Format::start (the zero point's share) or 0, add one Format::Dot step per
// step, and are scaled into the float sums once per block; kHasMin adds each row's min times the
// block's sum, kHasSkew each row's skew times the block's skew sum.
template <class Format, bool kHasMin, bool kHasSkew = false>
struct Tile {
  using Column = typename Format::Column;
  using Dot = typename Format::Dot;
  using Block = PanelBlock<Format>;
  const uint8_t* panel;
  int64_t blocks;
  int32_t zero_point;

  template <int C>
  void run(const Column* cols, int64_t g0, VecF (*out)[C]) const {
    constexpr int V = kTileVecs;
    VecF acc[V][C];
    for (int v = 0; v < V; ++v)
      for (int c = 0; c < C; ++c) acc[v][c] = VecF(0.0f);
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* pb = panel + b * Block::kBytes;
      const uint8_t* group = pb + g0 * Block::kGroupBytes;
      typename Dot::Sum isum[V][C];
      for (int v = 0; v < V; ++v)
        for (int c = 0; c < C; ++c) isum[v][c] = Dot::zero();
#pragma GCC unroll 16
      for (int j = 0; j < Format::kSteps; ++j) {
        VecI w[V];
        for (int v = 0; v < V; ++v)
          w[v] = VecI::load_aligned(
              reinterpret_cast<const int32_t*>(group + v * Block::kGroupBytes + j * Block::kVecBytes));
        for (int c = 0; c < C; ++c) {
          const VecI x(Format::word(cols[c], b, j));
          for (int v = 0; v < V; ++v) isum[v][c] = Dot::add(isum[v][c], w[v], x);
        }
      }
      const auto* scales = reinterpret_cast<const float*>(pb + Block::kScalesOffset) + g0 * kLanes;
      VecF d[V];
      for (int v = 0; v < V; ++v) d[v] = VecF::load_aligned(scales + v * kLanes);
      for (int c = 0; c < C; ++c) {
        const VecF s(cols[c].scale[b]);
        const VecI start(Format::kHasStart ? Format::start(cols[c], b, zero_point) : 0);
        for (int v = 0; v < V; ++v) {
          VecI total(Dot::total(isum[v][c]));
          if constexpr (Format::kHasStart) total += start;
          GGL_AVX512_UNDEFINED_BEGIN
          acc[v][c] = xsimd::fma(xsimd::batch_cast<float>(total), d[v] * s, acc[v][c]);
          GGL_AVX512_UNDEFINED_END
        }
      }
      if constexpr (kHasMin) {
        const auto* mins = reinterpret_cast<const float*>(pb + Block::kMinsOffset) + g0 * kLanes;
        VecF m[V];
        for (int v = 0; v < V; ++v) m[v] = VecF::load_aligned(mins + v * kLanes);
        for (int c = 0; c < C; ++c) {
          const VecF s(cols[c].sum[b]);
          for (int v = 0; v < V; ++v) acc[v][c] = xsimd::fma(m[v], s, acc[v][c]);
        }
      }
      if constexpr (kHasSkew) {
        const auto* skews = reinterpret_cast<const float*>(pb + Block::kSkewsOffset) + g0 * kLanes;
        VecF k[V];
        for (int v = 0; v < V; ++v) k[v] = VecF::load_aligned(skews + v * kLanes);
        for (int c = 0; c < C; ++c) {
          const VecF s(cols[c].skew_sum[b]);
          for (int v = 0; v < V; ++v) acc[v][c] = xsimd::fma(k[v], s, acc[v][c]);
        }
      }
    }
    for (int v = 0; v < V; ++v)
      for (int c = 0; c < C; ++c) out[v][c] = acc[v][c];
  }
};

// Under clang, each column count's walk below is a function of its own. Inlined into one, as the
// compilers do by themselves, clang's induction-variable pass took half of CI's sanitizer build of
// gemm_int16.cpp (avx512: 69 s of CPU, 43 s without; the same panels at -O3, bit-identical). GCC's
// builds are left as they are: its inlining budget is the file's, and the rows paths' code would
// change with it (it did on aarch64).
#if defined(__clang__)
#define GGL_COLUMN_COUNT_WALK __attribute__((noinline))
#else
#define GGL_COLUMN_COUNT_WALK
#endif

// Runs Tile::template run<C> over every register tile of the panel's rows and the columns, and
// stores the results: y[c][r] for r < rows.
template <class Tile, class Column>
void multiply_columns(const Tile& tile, int64_t rows, const Column* cols, float* const* y, int64_t n_cols) {
  constexpr int kMaxCols = gemm_steps::kMaxCols;
  auto run = [&]<int C>(int64_t c0) GGL_COLUMN_COUNT_WALK {
    for (int64_t g0 = 0; g0 < kGroups && g0 * kLanes < rows; g0 += kTileVecs) {
      VecF out[kTileVecs][C];
      tile.template run<C>(cols + c0, g0, out);
      for (int v = 0; v < kTileVecs; ++v) {
        const int64_t r0 = (g0 + v) * kLanes, valid = std::clamp<int64_t>(rows - r0, 0, kLanes);
        if (valid == 0) break;
        for (int c = 0; c < C; ++c) gemm_steps::store_rows(y[c0 + c] + r0, out[v][c], valid);
      }
    }
  };
  int64_t c0 = 0;
  for (; c0 + kMaxCols <= n_cols; c0 += kMaxCols) run.template operator()<kMaxCols>(c0);
  [&]<int... C>(std::integer_sequence<int, C...>) {
    const int64_t left = n_cols - c0;
    ((left == C + 1 ? run.template operator()<C + 1>(c0) : void()), ...);
  }
  (std::make_integer_sequence<int, kMaxCols - 1>{});
}

// IntGemm::pack_panel for a Format: per block and lane group, the rows' scales (and Q4_1's mins)
// as floats, and Format::pack_group(t, qs, out) writing the group's step vectors from the rows'
// quants (qs[r]: row r's quants; past `rows`, zeros).
template <class Format>
void pack_interleaved_panel(Type t, const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, void* panel);
// Whether a lane group is whole groups of interleaved rows: only such sets take interleaved types
// (gemm_rows8.h; NEON's lane groups are 4 rows, and its sets take none).
inline constexpr bool kWholeInterleavedGroups = kLanes % kInterleavedRows == 0;
template <class Format>
void pack_panel(Type t, const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, void* panel) {
  if constexpr (kWholeInterleavedGroups)
    if (is_interleaved(t)) return pack_interleaved_panel<Format>(t, w, row_stride, rows, n, panel);
  using Block = PanelBlock<Format>;
  const size_t block_bytes = traits(t).block_bytes;
  const size_t qs_offset = (t == Type::Q4_1 ? 2 : 1) * sizeof(uint16_t);  // after d (and m)
  static const uint8_t zeros[kQuantBlock] = {};
  auto* out = static_cast<uint8_t*>(panel);
  for (int64_t g = 0; g < kGroups; ++g) {
    const int64_t count = std::clamp<int64_t>(rows - g * kLanes, 0, kLanes);
    const gemm_steps::GroupRows group = gemm_steps::group_rows(count, row_stride);
    const uint8_t* first = w + g * kLanes * row_stride;
    for (int64_t b = 0; b < n / kQuantBlock; ++b) {
      uint8_t* pb = out + b * Block::kBytes;
      const uint8_t* blocks = first + b * block_bytes;
      auto* scales = reinterpret_cast<float*>(pb + Block::kScalesOffset) + g * kLanes;
      auto* mins = reinterpret_cast<float*>(pb + Block::kMinsOffset) + g * kLanes;
      if (count == 0) {  // a short panel's empty groups: zero scales, never stored
        VecF(0.0f).store_aligned(scales);
        VecF(0.0f).store_aligned(mins);
        continue;
      }
      VecF(gemm_steps::gather_f16(blocks, group)).store_aligned(scales);
      (t == Type::Q4_1 ? VecF(gemm_steps::gather_f16(blocks + sizeof(uint16_t), group)) : VecF(0.0f))
          .store_aligned(mins);
      const uint8_t* qs[kLanes];
      for (int64_t r = 0; r < kLanes; ++r) qs[r] = r < count ? blocks + r * row_stride + qs_offset : zeros;
      Format::pack_group(t, qs, pb + g * Block::kGroupBytes);
    }
  }
}

// pack_panel for interleaved rows (Q4_0_R8, Q8_0_R8: cpu/interleaved.h; `rows` a multiple of 8): each
// block of a group of 8 rows is taken back to the rows' plain blocks on the stack and packed as
// the plain type's (prefill only: the decode path reads the interleaved layout as it is).
template <class Format>
void pack_interleaved_panel(Type t, const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, void* panel) {
  using Block = PanelBlock<Format>;
  constexpr int64_t kSpan = kInterleavedRows;
  alignas(64) uint8_t qs[kLanes][kMaxInterleavedQuantBytes] = {};
  alignas(64) float scales[kLanes] = {};
  uint16_t halves[kSpan];
  const uint8_t* rows_qs[kLanes];
  for (int64_t r = 0; r < kLanes; ++r) rows_qs[r] = qs[r];
  auto* out = static_cast<uint8_t*>(panel);
  for (int64_t g = 0; g < kGroups; ++g) {
    const int64_t count = std::clamp<int64_t>(rows - g * kLanes, 0, kLanes);
    for (int64_t b = 0; b < n / kQuantBlock; ++b) {
      uint8_t* pb = out + b * Block::kBytes;
      for (int64_t i = 0; i < kLanes / kSpan; ++i) {
        const int64_t r0 = i * kSpan;
        if (r0 >= count) {
          std::fill_n(&qs[r0][0], kSpan * kMaxInterleavedQuantBytes, uint8_t{0});
          std::fill_n(scales + r0, kSpan, 0.0f);
          continue;
        }
        deinterleave_block(t, w + (g * kLanes + r0) * row_stride, b, halves, qs + r0);
        for (int64_t r = 0; r < kSpan; ++r) scales[r0 + r] = fp16_to_f32(halves[r]);
      }
      VecF::load_aligned(scales).store_aligned(reinterpret_cast<float*>(pb + Block::kScalesOffset) + g * kLanes);
      VecF(0.0f).store_aligned(reinterpret_cast<float*>(pb + Block::kMinsOffset) + g * kLanes);
      if (count > 0) Format::pack_group(plain_type(t), rows_qs, pb + g * Block::kGroupBytes);
    }
  }
}

// IntGemm::pack_panel for the types a Kind unpacks into 32-value sub-blocks of 16-bit weights
// (value d * w + m per sub-block: the K-quant / IQ4 / Q5 types, cpu/arch/kquant_unpack.h):
// per lane group, each row's weight block is unpacked once (Kind::unpack), and each sub-block's
// rows go into its pair vectors through the set's Dot::pack_words (a transpose of 32-bit pairs),
// with the rows' d and m as the panel block's scales and mins. Rows past `rows` are zero.
inline constexpr size_t kPackPrefetchBytes = 1024;
template <class Format, class Kind>
void pack_unpacked_panel(const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, void* panel) {
  using Block = PanelBlock<Format>;
  using WeightBlock = typename Kind::Block;
  constexpr int64_t kSubs = Kind::kValues / kQuantBlock;
  alignas(64) int16_t q[kSubs][kLanes][kQuantBlock];
  alignas(64) float d[kSubs][kLanes], m[kSubs][kLanes], skew[kSubs][kLanes] = {};
  auto* out = static_cast<uint8_t*>(panel);
  for (int64_t g = 0; g < kGroups; ++g) {
    const int64_t count = std::clamp<int64_t>(rows - g * kLanes, 0, kLanes);
    if (count < kLanes) {
      std::fill_n(&q[0][0][0], kSubs * kLanes * kQuantBlock, int16_t{0});
      std::fill_n(&d[0][0], kSubs * kLanes, 0.0f);
      std::fill_n(&m[0][0], kSubs * kLanes, 0.0f);
    }
    for (int64_t wb = 0; wb < n / Kind::kValues; ++wb) {
      uint8_t* first = out + wb * kSubs * Block::kBytes;
      for (int64_t r = 0; r < count; ++r) {
        const auto* block = reinterpret_cast<const WeightBlock*>(w + (g * kLanes + r) * row_stride) + wb;
        // The rows are kLanes streams from memory: fetch each one a few lines ahead.
        __builtin_prefetch(reinterpret_cast<const uint8_t*>(block) + kPackPrefetchBytes);
        Kind::unpack(*block, [&](int s, const auto& weights, float ds, float ms) {
          weights.store(q[s][r]);
          d[s][r] = ds;
          m[s][r] = ms;
        });
        if constexpr (Kind::kHasSkew) {
          alignas(32) float sk[kSubs];
          Kind::skews(*block, sk);
          for (int64_t s = 0; s < kSubs; ++s) skew[s][r] = sk[s];
        }
      }
      for (int64_t s = 0; s < kSubs; ++s) {
        uint8_t* pb = first + s * Block::kBytes;
        VecF::load_aligned(d[s]).store_aligned(reinterpret_cast<float*>(pb + Block::kScalesOffset) + g * kLanes);
        VecF::load_aligned(m[s]).store_aligned(reinterpret_cast<float*>(pb + Block::kMinsOffset) + g * kLanes);
        if constexpr (Kind::kHasSkew)  // read only by the Q2_K tiles
          VecF::load_aligned(skew[s]).store_aligned(reinterpret_cast<float*>(pb + Block::kSkewsOffset) + g * kLanes);
        if (count > 0) Format::Dot::pack_words(q[s], pb + g * Block::kGroupBytes);
      }
    }
  }
}

// Whether a block's values have a min (value d * w + m): the panels then add m times the
// activations' block sum.
inline bool has_min(Type t) {
  return t == Type::Q4_1 || t == Type::Q5_1 || t == Type::Q2_K || t == Type::Q4_K || t == Type::Q5_K;
}
// Whether its min differs between a block's halves (Q2_K: a min per 16 values): the panels then
// also add the skew times the activations' skew sum (16-bit columns only).
inline bool has_skew(Type t) { return t == Type::Q2_K; }

// IntGemm::multiply_panel for a Format: the columns viewed 64 at a time, the types with a min
// (has_min) with it.
template <class Format>
void multiply_panel(Type t, const void* panel, int64_t rows, int64_t n, const void* const* columns, float* const* y,
                    int64_t n_cols) {
  constexpr int64_t kBatch = 64;
  typename Format::Column cols[kBatch];
  const auto* p = static_cast<const uint8_t*>(panel);
  const int64_t blocks = n / kQuantBlock;
  t = plain_type(t);  // an interleaved type's panels are its plain type's
  const int32_t zero_point = Format::zero_point(t);
  for (int64_t c0 = 0; c0 < n_cols; c0 += kBatch) {
    const int64_t count = std::min(kBatch, n_cols - c0);
    for (int64_t c = 0; c < count; ++c) cols[c] = Format::view(columns[c0 + c], n);
    if constexpr (requires(typename Format::Column col) { col.skew_sum; }) {
      if (has_skew(t)) {
        multiply_columns(Tile<Format, true, true>{p, blocks, zero_point}, rows, cols, y + c0, count);
        continue;
      }
    }
    if (has_min(t))
      multiply_columns(Tile<Format, true>{p, blocks, zero_point}, rows, cols, y + c0, count);
    else
      multiply_columns(Tile<Format, false>{p, blocks, zero_point}, rows, cols, y + c0, count);
  }
}

}  // namespace ggl::GGL_ISA::gemm_panel
#endif
