// kInt16Gemm (int_gemm.h): 16-bit activations, a pair of 16-bit products per 32-bit lane
// (gemm_steps.h's Pairs: VPDPWSSD on AVX-512, VPMADDWD + VPADDD on AVX2). Layouts:
//   column: int16 q[n] | float scale[n/32] | float sum[n/32] | float offset[n/32] | float
//           hi_offset[n/32] | int8 hi[n] | uint8 lo[n] | float skew_sum[n/32] | int32 qsum[n/32],
//           each part 64-byte aligned; the block value is scale * q, sum is the float sum of the
//           block's activations (for Q4_1's min), skew_sum the sum of its first 16 minus that of
//           its last 16 (for Q2_K's two mins per 32), and the rest serve the rows paths: q = 256 *
//           hi + lo, qsum is the sum of the block's q, offset scale * qsum, hi_offset scale * 4096
//           times the sum of its hi.
//   panel:  per block of 32 weights: 32 / kLanes lane groups of kLanes rows, each 16 vectors (one
//           per pair of weights) whose lane r holds that pair of row r as two int16; then the
//           rows' scales [32], mins [32] and skews [32] as floats (gemm_panel.h).
// Weights: Q4_0 / Q4_1 / Q8_0 unpacked by the set's steps; the K-quant / IQ4 / Q5 types (on the
// x86 and ARM sets), each 32 values unpacked to 16-bit w with a float d and m (value d * w + m;
// Q2_K also + skew for its first 16 values and - skew for its last 16) by arch/kquant_unpack.h,
// the same unpacking for the panels and the rows.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/quant/quant.h"

#include "ggml-like/cpu/simd/gemm_panel.h"
#include "ggml-like/cpu/simd/gemm_rows.h"
#include "ggml-like/cpu/simd/gemm_rows8.h"
#include "ggml-like/cpu/simd/set_declarations.h"
#if GGL_INT_GEMM
#include "ggml-like/cpu/arch/unpack_kinds.h"  // GGL_INT16_UNPACK: the K-quant / IQ4 / Q5 / i-quant types
#endif

namespace ggl::GGL_ISA {
namespace {
#if GGL_INT_GEMM

constexpr int64_t kBlock = kQuantBlock;  // 32 weights, 16 pairs
constexpr int64_t kPairs = kBlock / 2;
// Activation levels each side of zero: 14 bits of magnitude, so that a panel block's int32 sum of
// 32 products with Q6_K's 16-bit weights (|w| <= 4096) cannot wrap around (kquant_unpack.h).
constexpr int32_t kLevels = 16383;

size_t scales_bytes(int64_t n) { return round64(n / kBlock * sizeof(float)); }

size_t column_bytes(int64_t n) { return round64(n * sizeof(int16_t)) + 6 * scales_bytes(n) + 2 * round64(n); }

struct Column {
  const int16_t* q;
  const float* scale;
  const float* sum;
  const float* offset;
  const float* hi_offset;
  const int8_t* hi;
  const uint8_t* lo;
  const float* skew_sum;
  const int32_t* qsum;
};

// 16-bit activations: a step adds a pair of weight-activation products per lane.
struct Format {
  using Column = GGL_ISA::Column;
  using Dot = gemm_steps::Pairs;
  static constexpr int kSteps = kPairs;
  static constexpr bool kHasStart = false;
  static Column view(const void* p, int64_t n) {
    const auto* base = static_cast<const uint8_t*>(p);
    const size_t q = round64(n * sizeof(int16_t)), s = scales_bytes(n);
    return {reinterpret_cast<const int16_t*>(base),
            reinterpret_cast<const float*>(base + q),
            reinterpret_cast<const float*>(base + q + s),
            reinterpret_cast<const float*>(base + q + 2 * s),
            reinterpret_cast<const float*>(base + q + 3 * s),
            reinterpret_cast<const int8_t*>(base + q + 4 * s),
            reinterpret_cast<const uint8_t*>(base + q + 4 * s + round64(n)),
            reinterpret_cast<const float*>(base + q + 4 * s + 2 * round64(n)),
            reinterpret_cast<const int32_t*>(base + q + 5 * s + 2 * round64(n))};
  }
  // Q4_0's offset of 8 comes off while unpacking (its weights are signed 16-bit integers here).
  static int32_t zero_point(Type) { return 0; }
  static int32_t start(const Column&, int64_t, int32_t) { return 0; }
  static int32_t word(const Column& c, int64_t b, int j) {
    int32_t pair;
    std::memcpy(&pair, c.q + b * kBlock + 2 * j, sizeof pair);
    return pair;
  }
  static void pack_group(Type t, const uint8_t* const* qs, uint8_t* out) {
    if (t == Type::Q8_0) return Dot::pack_q8(qs, out);
    Dot::pack_q4(qs, t == Type::Q4_0, out);
  }
};

// The rows path (gemm_rows.h): the set's PairRows step reads what it needs of the column (the
// int16 values, or their high and low bytes).
struct RowsFormat {
  using Steps = gemm_steps::PairRows;
  static constexpr bool kTakesQ8_0 = true;
  struct Column {
    gemm_rows::BlockScales scales;
    const int16_t* q;
    const int8_t* hi;
    const uint8_t* lo;
  };
  static Column view(const void* p, int64_t n) {
    const GGL_ISA::Column c = Format::view(p, n);
    return {{c.scale, c.offset, c.sum, c.hi_offset, c.skew_sum}, c.q, c.hi, c.lo};
  }
  static auto sums(const Steps::Weights& w, const Column& c, int64_t b) {
    return Steps::sums(w, c.q + b * kBlock, c.hi + b * kBlock, c.lo + b * kBlock);
  }
  static auto signed_sums(const Steps::Weights& w, const Column& c, int64_t b) {
    return Steps::signed_sums(w, c.q + b * kBlock, c.hi + b * kBlock, c.lo + b * kBlock);
  }
#if GGL_INT16_UNPACK
  template <class Weights>
  static auto unpacked_sums(const Weights& w, const Column& c, int64_t b) {
    return unpack16::sums(w, c.q + b * kBlock, c.hi + b * kBlock, c.lo + b * kBlock);
  }
#endif
};

#if GGL_ROWS8
// The rows path on interleaved rows (gemm_rows8.h). Q4_0_R8: the weights times the activations'
// low and high bytes (q = 256 * hi + lo) at 4u.. and 16 + 4u...
struct Rows8Q4Format : Format {  // Format's column and view
  using Steps = gemm_rows8_steps::Bytes;
  static constexpr bool kSuperBlocks = false;
  static constexpr int kQuads = kBlock / 2 / 4;
  static constexpr int32_t kZeroPoint = 8;
  static Steps::Sum add(Steps::Sum s, const Steps::Weights& w, const Column& c, int64_t b, int u) {
    const int64_t at = b * kBlock + 4 * u;
    return Steps::add(s, w, c.lo + at, c.lo + at + kBlock / 2, c.hi + at, c.hi + at + kBlock / 2);
  }
};
// Q8_0_R8: the weights widened to 16 bits times the activations q at 4u...
struct Rows8Q8Format : Format {
  using Steps = gemm_rows8_steps::Words;
  static constexpr bool kSuperBlocks = false;
  static constexpr int kQuads = kBlock / 4;
  static constexpr int32_t kZeroPoint = 0;
  static Steps::Sum add(Steps::Sum s, const Steps::Weights& w, const Column& c, int64_t b, int u) {
    return Steps::add(s, w, c.q + b * kBlock + 4 * u);
  }
};
// Q6_K_R8: the 6-bit quants less 32, widened, times the activations q of the sub-block (block b).
struct Rows8Q6Format : Format {
  using Steps = gemm_rows8_steps::Q6Quads;
  static constexpr bool kSuperBlocks = true;
  static Steps::Sum add(const Steps::Sum& s, const Steps::Weights& w, const Column& c, int64_t b, int u) {
    return Steps::add(s, w, c.q + b * kBlock, u);
  }
};
#endif

size_t panel_bytes(int64_t n) { return n / kBlock * gemm_panel::PanelBlock<Format>::kBytes; }

// Values per block of the types this set takes: Q4_0 / Q4_1 / Q8_0, and where the set unpacks
// them (kquant_unpack.h) the K-quant / IQ4 / Q5 types; 0 for the others.
int64_t block_values(Type t) {
  if (t == Type::Q4_0 || t == Type::Q4_1 || t == Type::Q8_0) return kBlock;
  if (gemm_rows8::takes(t)) return traits(t).block_size;
#if GGL_INT16_UNPACK
  return unpack16::block_values(t);
#else
  return 0;
#endif
}

bool supports(Type t, int64_t n) {
  const int64_t unit = block_values(t);
  return int_gemm_enabled() && unit > 0 && n > 0 && n % unit == 0;
}

void pack_panel(Type t, const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, void* panel) {
  if (t == kQ6_K_R8) {  // back to plain rows first (prefill only; `rows` whole groups of 8)
    thread_local std::vector<uint8_t> plain;
    plain.resize(rows * row_stride);
    for (int64_t g = 0; g < rows / kInterleavedRows; ++g)
      deinterleave_group(t, w + g * kInterleavedRows * row_stride, plain.data() + g * kInterleavedRows * row_stride, n);
    return pack_panel(Type::Q6_K, plain.data(), row_stride, rows, n, panel);
  }
#if GGL_INT16_UNPACK
  if (unpack16::with_kind(
          t, [&]<class Kind>() { gemm_panel::pack_unpacked_panel<Format, Kind>(w, row_stride, rows, n, panel); }))
    return;
#endif
  gemm_panel::pack_panel<Format>(t, w, row_stride, rows, n, panel);
}

void multiply_rows(Type t, const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, const void* const* columns,
                   float* const* y, int64_t n_cols) {
#if GGL_ROWS8
  if (t == kQ4_0_R8) return gemm_rows8::multiply_rows<Rows8Q4Format>(w, row_stride, rows, n, columns, y, n_cols);
  if (t == kQ8_0_R8) return gemm_rows8::multiply_rows<Rows8Q8Format>(w, row_stride, rows, n, columns, y, n_cols);
  if (t == kQ6_K_R8) return gemm_rows8::multiply_rows<Rows8Q6Format>(w, row_stride, rows, n, columns, y, n_cols);
#endif
#if GGL_INT16_UNPACK
  if (unpack16::with_kind(t, [&]<class Kind>() {
        gemm_rows::multiply_unpacked_rows<RowsFormat, Kind>(w, row_stride, rows, n, columns, y, n_cols);
      }))
    return;
#endif
  gemm_rows::multiply_rows<RowsFormat>(t, w, row_stride, rows, n, columns, y, n_cols);
}

void quantize_column(const float* x, int64_t n, void* column) {
  auto* base = static_cast<uint8_t*>(column);
  const size_t q_bytes = round64(n * sizeof(int16_t)), s_bytes = scales_bytes(n);
  auto* q = reinterpret_cast<int16_t*>(base);
  auto* scale = reinterpret_cast<float*>(base + q_bytes);
  auto* sum = reinterpret_cast<float*>(base + q_bytes + s_bytes);
  auto* offset = reinterpret_cast<float*>(base + q_bytes + 2 * s_bytes);
  auto* hi_offset = reinterpret_cast<float*>(base + q_bytes + 3 * s_bytes);
  auto* hi = reinterpret_cast<int8_t*>(base + q_bytes + 4 * s_bytes);
  auto* lo = reinterpret_cast<uint8_t*>(base + q_bytes + 4 * s_bytes + round64(n));
  auto* skew_sum = reinterpret_cast<float*>(base + q_bytes + 4 * s_bytes + 2 * round64(n));
  auto* qsum = reinterpret_cast<int32_t*>(base + q_bytes + 5 * s_bytes + 2 * round64(n));
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const gemm_panel::QuantizedBlock block = gemm_panel::quantize_block(x + b * kBlock, static_cast<float>(kLevels));
    scale[b] = block.scale;
    sum[b] = block.sum;
    skew_sum[b] = block.skew;
    int16_t* qb = q + b * kBlock;
    int32_t q_sum = 0, hi_sum = 0;
    for (int64_t i = 0; i < kBlock; ++i) {  // from locals: the byte stores may alias everything
      const int32_t v = std::clamp(block.q[i], -kLevels, kLevels);
      qb[i] = static_cast<int16_t>(v);
      hi[b * kBlock + i] = static_cast<int8_t>(v >> 8);
      lo[b * kBlock + i] = static_cast<uint8_t>(v & 0xFF);
      q_sum += v;
      hi_sum += v >> 8;
    }
    qsum[b] = q_sum;
    offset[b] = block.scale * static_cast<float>(q_sum);
    hi_offset[b] = block.scale * 4096.0f * static_cast<float>(hi_sum);
  }
}

#endif

}  // namespace

#if GGL_INT_GEMM
const IntGemm kInt16Gemm{"int16",         kLevels,     supports,   column_bytes,
                         quantize_column, panel_bytes, pack_panel, gemm_panel::multiply_panel<Format>,
                         multiply_rows};
#else  // no integer steps for this set (gemm_steps.h)
const IntGemm kInt16Gemm = unavailable_int_gemm("int16", 16383);
#endif

}  // namespace ggl::GGL_ISA
