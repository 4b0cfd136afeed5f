// kInt8Gemm (int_gemm.h): 8-bit activations for 4-bit weights, four byte products per 32-bit
// lane (gemm_steps.h's Quads: VPDPBUSD on AVX-512, VPMADDUBSW + VPMADDWD on AVX2). Layouts:
//   column: int8 q[n] | float scale[n/32] | int32 qsum[n/32] (sum of the block's q) | float
//           sum[n/32] (the float sum of the block's activations, for Q4_1's min) | float
//           offset[n/32] (scale * qsum, for the rows path); parts 64-byte aligned.
//   panel:  per block of 32 weights: 32 / kLanes lane groups of kLanes rows, each 8 vectors (one
//           per 4 consecutive weights) whose lane r holds those 4 weights of row r as unsigned
//           bytes (the 4-bit quant, 0..15); then the rows' scales [32] and mins [32] (gemm_panel.h).
// Q4_0's weights are (q - 8) * d: the 8 comes off through the column's qsum, which seeds each
// block's integer sum with -8 * qsum.
#include <algorithm>
#include <cstring>

#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/quant/quant.h"

#include "ggml-like/cpu/simd/gemm_panel.h"
#include "ggml-like/cpu/simd/gemm_rows.h"
#include "ggml-like/cpu/simd/gemm_rows8.h"
#include "ggml-like/cpu/simd/set_declarations.h"

namespace ggl::GGL_ISA {
namespace {
#if GGL_INT_GEMM

constexpr int64_t kBlock = kQuantBlock;
constexpr int64_t kQuadsPerBlock = kBlock / 4;  // 4 weights per 32-bit lane

size_t scales_bytes(int64_t n) { return round64(n / kBlock * sizeof(float)); }

size_t column_bytes(int64_t n) { return round64(n) + 4 * scales_bytes(n); }

struct Column {
  const int8_t* q;
  const float* scale;
  const int32_t* qsum;
  const float* sum;
  const float* offset;  // scale * qsum (the rows path's zero point)
};

// 8-bit activations: a step adds 4 weight-activation byte products per lane (weights unsigned);
// a block's sum starts at -zero_point * qsum, removing the quants' offset.
struct Format {
  using Column = GGL_ISA::Column;
  using Dot = gemm_steps::Quads;
  static constexpr int kSteps = kQuadsPerBlock;
  static constexpr bool kHasStart = true;
  static Column view(const void* p, int64_t n) {
    const auto* base = static_cast<const uint8_t*>(p);
    const size_t s = scales_bytes(n), q = round64(n);
    return {reinterpret_cast<const int8_t*>(base), reinterpret_cast<const float*>(base + q),
            reinterpret_cast<const int32_t*>(base + q + s), reinterpret_cast<const float*>(base + q + 2 * s),
            reinterpret_cast<const float*>(base + q + 3 * s)};
  }
  static int32_t zero_point(Type t) { return t == Type::Q4_0 ? 8 : 0; }
  static int32_t start(const Column& c, int64_t b, int32_t zero_point) { return -zero_point * c.qsum[b]; }
  static int32_t word(const Column& c, int64_t b, int j) {
    int32_t quad;
    std::memcpy(&quad, c.q + b * kBlock + 4 * j, sizeof quad);
    return quad;
  }
  static void pack_group(Type, const uint8_t* const* qs, uint8_t* out) { Dot::pack_q4(qs, out); }
};

size_t panel_bytes(int64_t n) { return n / kBlock * gemm_panel::PanelBlock<Format>::kBytes; }

bool supports(Type t, int64_t n) {
  // Of the interleaved types, Q4_0_R8 only: Q8_0 weights keep 16-bit activations everywhere.
  const bool interleaved = t == kQ4_0_R8 && gemm_rows8::takes(t);
  return int_gemm_enabled() && (t == Type::Q4_0 || t == Type::Q4_1 || interleaved) && n > 0 && n % kBlock == 0;
}

void quantize_column(const float* x, int64_t n, void* column) {
  auto* base = static_cast<uint8_t*>(column);
  const size_t s = scales_bytes(n), qb = round64(n);
  auto* q = reinterpret_cast<int8_t*>(base);
  auto* scale = reinterpret_cast<float*>(base + qb);
  auto* qsum = reinterpret_cast<int32_t*>(base + qb + s);
  auto* sum = reinterpret_cast<float*>(base + qb + 2 * s);
  auto* offset = reinterpret_cast<float*>(base + qb + 3 * s);
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const gemm_panel::QuantizedBlock block = gemm_panel::quantize_block(x + b * kBlock, 127.0f);
    scale[b] = block.scale;
    sum[b] = block.sum;
    int32_t block_sum = 0;  // a local: the int8 stores may alias qsum[b]
    for (int64_t i = 0; i < kBlock; ++i) {
      const int32_t v = std::clamp(block.q[i], -127, 127);
      q[b * kBlock + i] = static_cast<int8_t>(v);
      block_sum += v;
    }
    qsum[b] = block_sum;
    offset[b] = block.scale * static_cast<float>(block_sum);
  }
}

// The rows path (gemm_rows.h): a block's 32 nibbles times its 32 activation bytes, 8 lane sums.
struct RowsFormat {
  using Steps = gemm_steps::QuadRows;
  static constexpr bool kTakesQ8_0 = false;
  struct Column {
    gemm_rows::BlockScales scales;
    const int8_t* q;
  };
  static Column view(const void* p, int64_t n) {
    const GGL_ISA::Column c = Format::view(p, n);
    return {{c.scale, c.offset, c.sum, nullptr}, c.q};
  }
  static auto sums(const Steps::Weights& w, const Column& c, int64_t b) { return Steps::sums(w, c.q + b * kBlock); }
};

#if GGL_ROWS8
// The rows path on interleaved rows (gemm_rows8.h): quads u of a block's low and high nibbles times
// the activation bytes 4u.. and 16 + 4u...
struct Rows8Format : Format {  // Format's column and view
  using Steps = gemm_rows8_steps::Quads;
  static constexpr bool kSuperBlocks = false;
  static constexpr int kQuads = kBlock / 2 / 4;
  static constexpr int32_t kZeroPoint = 8;
  static Steps::Sum add(Steps::Sum s, const Steps::Weights& w, const Column& c, int64_t b, int u) {
    const int8_t* x = c.q + b * kBlock + 4 * u;
    return Steps::add(s, w, x, x + kBlock / 2);
  }
};
#endif

void multiply_rows(Type t, const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, const void* const* columns,
                   float* const* y, int64_t n_cols) {
#if GGL_ROWS8
  if (t == kQ4_0_R8) return gemm_rows8::multiply_rows<Rows8Format>(w, row_stride, rows, n, columns, y, n_cols);
#endif
  gemm_rows::multiply_rows<RowsFormat>(t, w, row_stride, rows, n, columns, y, n_cols);
}

#endif

}  // namespace

#if GGL_INT_GEMM
const IntGemm kInt8Gemm{"int8",
                        127,
                        supports,
                        column_bytes,
                        quantize_column,
                        panel_bytes,
                        gemm_panel::pack_panel<Format>,
                        gemm_panel::multiply_panel<Format>,
                        multiply_rows};
#else  // no integer steps for this set (gemm_steps.h)
const IntGemm kInt8Gemm = unavailable_int_gemm("int8", 127);
#endif

}  // namespace ggl::GGL_ISA
