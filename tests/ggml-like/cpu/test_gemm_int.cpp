// The integer GEMMs (int_gemm.h) of every kernel set this build has and this CPU runs (kernel_set.h),
// through panels (prefill) and straight from the rows (decode), against dequantize-then-multiply
// in double precision. A set without a path skips its tests, naming it, where it is not meant to
// have it (tests/support/kernel_sets.h) and fails them where it is. The only error they may add is the rounding of each activation to
// 16 (8) bits (at most half a step of its block's scale, amax / 32767 (127)) plus float
// accumulation, and the bound below is exactly that: a wrong lane, pair, scale, min or zero point
// in a kernel is far outside it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml-like/core/fp16.h"
#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/cpu/kernel_set.h"
#include "ggml-like/cpu/interleaved.h"
#include "ggml-like/quant/iq1.h"
#include "ggml-like/quant/kquants.h"
#include "ggml-like/quant/legacy.h"
#include "ggml-like/quant/quant.h"
#include "tests/support/kernel_sets.h"
#include "tests/support/random_floats.h"

namespace test_gemm_int {

using ggl::Type;

using Api = ggl::IntGemm;
using latte::testing::IntPath;

template <class T>
struct Aligned {
  explicit Aligned(size_t bytes) : raw(bytes + 64) {}
  T* get() {
    auto p = reinterpret_cast<uintptr_t>(raw.data());
    return reinterpret_cast<T*>((p + 63) / 64 * 64);
  }
  std::vector<uint8_t> raw;
};

struct Case {
  Type type;
  int64_t rows, n, cols;
};

enum class Path { kPanels, kRows };

// The K-quant / IQ4 / Q5 / i-quant types the 16-bit GEMM takes on the x86 and ARM sets (unpacked to
// 16-bit weights per 32 values), and the values per block of each.
constexpr Type kUnpackedTypes[] = {Type::Q2_K,   Type::Q3_K,  Type::Q4_K,    Type::Q5_K,  Type::Q6_K,  Type::IQ4_XS,
                                   Type::IQ4_NL, Type::Q5_0,  Type::Q5_1,    Type::IQ1_S, Type::IQ1_M, Type::IQ2_XXS,
                                   Type::IQ2_XS, Type::IQ2_S, Type::IQ3_XXS, Type::IQ3_S};
int64_t block_values(Type t) { return ggl::traits(t).block_size; }

// The min m of value i of a row, for the types whose values are d * w + m with a min per 32 (Q2_K:
// per 16) (rounding the activations touches only the d * w part: the min multiplies their exact
// sum).
double value_min(Type t, const uint8_t* row, int64_t i) {
  const int64_t b = i / 32;
  auto k_min = [&](const auto* blocks) {
    const auto& blk = blocks[b / 8];
    uint8_t sc, m;
    ggl::quant::scale_min_k4(static_cast<int>(b % 8), blk.scales, &sc, &m);
    return -static_cast<double>(ggl::fp16_to_f32(blk.dmin)) * m;
  };
  switch (t) {
    case Type::Q4_1: return ggl::fp16_to_f32(reinterpret_cast<const ggl::BlockQ4_1*>(row)[b].m);
    case Type::Q5_1: return ggl::fp16_to_f32(reinterpret_cast<const ggl::BlockQ5_1*>(row)[b].m);
    case Type::Q4_K: return k_min(reinterpret_cast<const ggl::BlockQ4_K*>(row));
    case Type::Q5_K: return k_min(reinterpret_cast<const ggl::BlockQ5_K*>(row));
    case Type::Q2_K: {
      const auto& blk = reinterpret_cast<const ggl::BlockQ2_K*>(row)[i / 256];
      return -static_cast<double>(ggl::fp16_to_f32(blk.dmin)) * (blk.scales[i % 256 / 16] >> 4);
    }
    default: return 0;
  }
}

void check(const Api& ig, Path path, const Case& k, uint32_t seed) {
  // The tests call this only for a set with the path (LATTE_REQUIRE_INT_PATH).
  ASSERT_TRUE(ig.supports(k.type, k.n)) << ig.name << " " << ggl::type_name(k.type) << " n " << k.n;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Every Q4_1 row offset: its min takes part throughout. An interleaved type's rows are made as
  // its plain type's and interleaved (cpu/interleaved.h).
  const latte::testing::QuantizedRows q =
      ggl::is_grid_iquant(k.type)
          ? latte::testing::random_iquant_rows(k.type, k.rows, k.n, rng)
          : latte::testing::quantized_rows(ggl::plain_type(k.type), k.rows, k.n, rng, normal, k.type == Type::Q4_1);
  const size_t stride = q.stride;
  std::vector<uint8_t> w = q.bytes;
  if (ggl::is_interleaved(k.type)) ggl::interleave_rows(k.type, q.bytes.data(), w.data(), k.rows, k.n);
  const std::vector<float>& wf = q.values;
  // Activations with an outlier, a block of zeros and a tiny block, as real hidden states have.
  const std::vector<float> x = latte::testing::hidden_state_like(rng, normal, k.cols, k.n, 7);

  const size_t cb = ig.column_bytes(k.n);
  Aligned<uint8_t> columns(cb * k.cols), panel(ig.panel_bytes(k.n));
  for (int64_t c = 0; c < k.cols; ++c) ig.quantize_column(x.data() + c * k.n, k.n, columns.get() + c * cb);
  std::vector<float> y(k.cols * k.rows, -1.0f);
  // Rows [r0, r0 + rows) of every column.
  auto multiply = [&](int64_t r0, int64_t rows) {
    std::vector<const void*> xs(k.cols);
    std::vector<float*> ys(k.cols);
    for (int64_t c = 0; c < k.cols; ++c) {
      xs[c] = columns.get() + c * cb;
      ys[c] = y.data() + c * k.rows + r0;
    }
    if (path == Path::kRows)
      return ig.multiply_rows(k.type, w.data() + r0 * stride, stride, rows, k.n, xs.data(), ys.data(), k.cols);
    ig.pack_panel(k.type, w.data() + r0 * stride, stride, rows, k.n, panel.get());
    ig.multiply_panel(k.type, panel.get(), rows, k.n, xs.data(), ys.data(), k.cols);
  };
  if (path == Path::kRows)
    multiply(0, k.rows);
  else
    for (int64_t r0 = 0; r0 < k.rows; r0 += ggl::kIntGemmPanelRows)
      multiply(r0, std::min(ggl::kIntGemmPanelRows, k.rows - r0));

  for (int64_t c = 0; c < k.cols; ++c) {
    const float* xc = x.data() + c * k.n;
    for (int64_t r = 0; r < k.rows; ++r) {
      const float* wr = wf.data() + r * k.n;
      double exact = 0, magnitude = 0, rounding = 0;
      for (int64_t b = 0; b < k.n / 32; ++b) {
        double amax = 0, wabs = 0;
        for (int64_t i = b * 32; i < b * 32 + 32; ++i) {
          exact += static_cast<double>(wr[i]) * xc[i];
          magnitude += std::fabs(static_cast<double>(wr[i]) * xc[i]);
          amax = std::max(amax, std::fabs(static_cast<double>(xc[i])));
          wabs += std::fabs(wr[i] - value_min(k.type, q.bytes.data() + r * stride, i));
        }
        rounding += 0.5 * amax / ig.levels * wabs;
      }
      const double bound = 1.001 * rounding + 2e-6 * magnitude + 1e-30;
      ASSERT_NEAR(y[c * k.rows + r], exact, bound)
          << ig.name << " " << ggl::type_name(k.type) << " rows " << k.rows << " n " << k.n << " cols " << k.cols
          << " at row " << r << " col " << c;
    }
  }
}

void check_shapes(const Api& api, std::initializer_list<Type> types) {
  uint32_t seed = 1;
  for (Type t : types)
    for (const Case& k :
         {Case{t, 32, 32, 1}, Case{t, 64, 128, 6}, Case{t, 40, 256, 13}, Case{t, 7, 96, 5}, Case{t, 96, 1408, 8}})
      check(api, Path::kPanels, k, seed++);
  check(api, Path::kPanels, Case{Type::Q4_0, 33, 64, 150}, 99);  // crosses the kernels' column batches
}

// The rows path walks the rows a block of about 128 KiB at a time (cpu/simd/row_walk.h), a group
// of 8 rows at a time for the interleaved types. Rows of type t and length n for two whole blocks
// and part of a third. (Test rows are made by the reference quantizer, whose search is most of
// these tests' time, under qemu most of test_ggml_cpu's: no more rows than that.)
constexpr size_t kRowWalkBlockBytes = 128 * 1024;
int64_t rows_past_two_walk_blocks(Type t, int64_t n) {
  const size_t stride = ggl::row_bytes(ggl::plain_type(t), n);
  if (!ggl::is_interleaved(t)) return 2 * static_cast<int64_t>(kRowWalkBlockBytes / stride) + 7;
  const auto groups = static_cast<int64_t>(kRowWalkBlockBytes / (ggl::kInterleavedRows * stride));
  return (2 * groups + 1) * ggl::kInterleavedRows;
}

// The rows path: a decode step's one column, the few of a short batch, odd block counts (the
// kernel alternates accumulators by block) and more rows than one 128 KiB row block, with one
// column and with five.
void check_row_shapes(const Api& api, std::initializer_list<Type> types) {
  uint32_t seed = 1000;
  for (Type t : types)
    for (const Case& k : {Case{t, 5, 32, 1}, Case{t, 37, 96, 1}, Case{t, 19, 2048, 3}, Case{t, 9, 160, 7},
                          Case{t, rows_past_two_walk_blocks(t, 1408), 1408, 1}, Case{t, 300, 1408, 5}})
      check(api, Path::kRows, k, seed++);
}

// Every count of columns around the kernels' register tiles (AVX2 takes 3 columns at a time,
// AVX-512 6, the rows path 4) and every tail of rows in a panel (vectors of 8 or 16 rows, register
// tiles of 16 or 32, panels of 32), on both paths.
void check_tails(const Api& api, Path path, std::initializer_list<Type> types) {
  uint32_t seed = 2000;
  for (Type t : types)
    for (int64_t rows : {1, 7, 8, 12, 17, 24, 31, 45})
      for (int64_t cols = 1; cols <= 13; ++cols) check(api, path, Case{t, rows, 64, cols}, seed++);
}

// The types unpacked to 16-bit weights, on one path: every column count around the register
// tiles with a row count that is not a multiple of the panel's (and one that fills whole panels),
// rows of one and of several weight blocks, and on the rows path two whole 128 KiB row blocks and
// part of a third.
void check_unpacked(const Api& api, Path path) {
  uint32_t seed = 3000;
  for (Type t : kUnpackedTypes) {
    const int64_t unit = block_values(t);
    for (int64_t cols = 1; cols <= 13; ++cols)
      for (int64_t rows : {45, 32}) check(api, path, Case{t, rows, unit * (1 + cols % 3), cols}, seed++);
    check(api, path, Case{t, 7, unit, 2}, seed++);
    const int64_t n = unit == 32 ? 1408 : 2048;
    check(api, path, Case{t, 70, n, 16}, seed++);
    if (path == Path::kRows) check(api, path, Case{t, rows_past_two_walk_blocks(t, n), n, 1}, seed++);
  }
}

// Every runnable kernel set, by name.
class PerKernelSet : public ::testing::TestWithParam<const ggl::CpuKernels*> {
 protected:
  const ggl::CpuKernels& set() const { return *GetParam(); }
  const Api& int16() const { return *GetParam()->int16; }
  const Api& int8() const { return *GetParam()->int8; }
  // Whether the set has each path, by one type it takes.
  bool has_int16() const { return int16().supports(Type::Q4_0, 32); }
  bool has_int8() const { return int8().supports(Type::Q4_0, 32); }
  bool has_unpacked() const { return int16().supports(Type::Q4_K, 256); }
};

TEST_P(PerKernelSet, Int16MatchesExactProductWithinActivationRounding) {
  LATTE_REQUIRE_INT_PATH(set(), IntPath::kInt16Gemm, has_int16());
  check_shapes(int16(), {Type::Q4_0, Type::Q4_1, Type::Q8_0});
}

TEST_P(PerKernelSet, Int8MatchesExactProductWithinActivationRounding) {
  LATTE_REQUIRE_INT_PATH(set(), IntPath::kInt8Gemm, has_int8());
  check_shapes(int8(), {Type::Q4_0, Type::Q4_1});
}

TEST_P(PerKernelSet, Int16RowsPathMatchesExactProductWithinActivationRounding) {
  LATTE_REQUIRE_INT_PATH(set(), IntPath::kInt16Gemm, has_int16());
  check_row_shapes(int16(), {Type::Q4_0, Type::Q4_1, Type::Q8_0});
}

TEST_P(PerKernelSet, Int8RowsPathMatchesExactProductWithinActivationRounding) {
  LATTE_REQUIRE_INT_PATH(set(), IntPath::kInt8Gemm, has_int8());
  check_row_shapes(int8(), {Type::Q4_0, Type::Q4_1});
}

TEST_P(PerKernelSet, Int16PanelAndRowTails) {
  LATTE_REQUIRE_INT_PATH(set(), IntPath::kInt16Gemm, has_int16());
  check_tails(int16(), Path::kPanels, {Type::Q4_0, Type::Q4_1, Type::Q8_0});
  check_tails(int16(), Path::kRows, {Type::Q4_0, Type::Q4_1, Type::Q8_0});
}

TEST_P(PerKernelSet, Int16UnpackedTypesPanelsMatchExactProductWithinActivationRounding) {
  LATTE_REQUIRE_INT_PATH(set(), IntPath::kInt16Unpacked, has_unpacked());
  check_unpacked(int16(), Path::kPanels);
}

TEST_P(PerKernelSet, Int16UnpackedTypesRowsMatchExactProductWithinActivationRounding) {
  LATTE_REQUIRE_INT_PATH(set(), IntPath::kInt16Unpacked, has_unpacked());
  check_unpacked(int16(), Path::kRows);
}

// Q6_K's largest 16-bit weights (scale -128 times q - 32 = -32: 4096) times activations all at the
// top level: a panel block's int32 sum of 32 such products is the largest the kernels meet, and
// must not wrap around (kquant_unpack.h).
TEST_P(PerKernelSet, Int16Q6KLargestWeightsDoNotOverflow) {
  const Api& ig = int16();
  constexpr int64_t n = 512, rows = 35;
  LATTE_REQUIRE_INT_PATH(set(), IntPath::kInt16Unpacked, ig.supports(Type::Q6_K, n));
  ggl::BlockQ6_K block{};
  for (int8_t& sc : block.scales) sc = -128;
  block.d = ggl::f32_to_fp16(1.0f);  // every value (q = 0): 1 * -128 * (0 - 32) = 4096
  std::vector<ggl::BlockQ6_K> w(rows * n / ggl::kSuperBlock, block);
  const size_t stride = ggl::row_bytes(Type::Q6_K, n);
  for (int64_t cols : {1, 9}) {
    const size_t cb = ig.column_bytes(n);
    Aligned<uint8_t> columns(cb * cols), panel(ig.panel_bytes(n));
    const std::vector<float> x(n, 1.0f);
    std::vector<const void*> xs(cols);
    std::vector<float> y(cols * rows);
    std::vector<float*> ys(cols);
    for (int64_t c = 0; c < cols; ++c) {
      ig.quantize_column(x.data(), n, columns.get() + c * cb);
      xs[c] = columns.get() + c * cb;
      ys[c] = y.data() + c * rows;
    }
    for (Path path : {Path::kRows, Path::kPanels}) {
      std::fill(y.begin(), y.end(), 0.0f);
      const auto* wb = reinterpret_cast<const uint8_t*>(w.data());
      if (path == Path::kRows) {
        ig.multiply_rows(Type::Q6_K, wb, stride, rows, n, xs.data(), ys.data(), cols);
      } else {
        for (int64_t r0 = 0; r0 < rows; r0 += ggl::kIntGemmPanelRows) {
          const int64_t count = std::min(ggl::kIntGemmPanelRows, rows - r0);
          std::vector<float*> at(cols);
          for (int64_t c = 0; c < cols; ++c) at[c] = ys[c] + r0;
          ig.pack_panel(Type::Q6_K, wb + r0 * stride, stride, count, n, panel.get());
          ig.multiply_panel(Type::Q6_K, panel.get(), count, n, xs.data(), at.data(), cols);
        }
      }
      for (int64_t i = 0; i < cols * rows; ++i)
        ASSERT_FLOAT_EQ(y[i], 4096.0f * n) << (path == Path::kRows ? "rows" : "panels") << " at " << i;
    }
  }
}

// Q4_0 / Q8_0 rows interleaved 8 at a time (cpu/interleaved.h), which the sets with
// gemm_rows8.h read as stored on the rows path and take back per block for the panels: a decode
// step's one column, the few of a short batch (the rows walk takes 4 at a time), rows of one block
// and of many, more groups than one 128 KiB walk, and panels of one, three and four groups.
void check_interleaved(const Api& api, Path path, Type t) {
  uint32_t seed = 4000;
  for (const Case& k :
       {Case{t, 8, 32, 1}, Case{t, 40, 96, 1}, Case{t, 24, 2048, 3}, Case{t, 16, 160, 7},
        Case{t, rows_past_two_walk_blocks(t, 1408), 1408, 1}, Case{t, 304, 1408, 5}, Case{t, 96, 1408, 8}})
    check(api, path, k, seed++);
  for (int64_t rows : {8, 24, 32, 56})
    for (int64_t cols = 1; cols <= 13; ++cols) check(api, path, Case{t, rows, 64, cols}, seed++);
}

TEST_P(PerKernelSet, Int16InterleavedRowsMatchExactProductWithinActivationRounding) {
  LATTE_REQUIRE_INT_PATH(set(), IntPath::kInterleavedRows, int16().supports(ggl::kQ4_0_R8, 32));
  for (Type t : {ggl::kQ4_0_R8, ggl::kQ8_0_R8}) {
    check_interleaved(int16(), Path::kRows, t);
    check_interleaved(int16(), Path::kPanels, t);
  }
}

// Q6_K rows interleaved 8 at a time: one super-block and several, one group and many (more than
// one 128 KiB walk), one column and the few of a short batch, and panels.
TEST_P(PerKernelSet, Int16InterleavedQ6_KRowsMatchExactProductWithinActivationRounding) {
  LATTE_REQUIRE_INT_PATH(set(), IntPath::kInterleavedRows, int16().supports(ggl::kQ6_K_R8, 256));
  const Type t = ggl::kQ6_K_R8;
  uint32_t seed = 5000;
  for (Path path : {Path::kRows, Path::kPanels})
    for (const Case& k : {Case{t, 8, 256, 1}, Case{t, 16, 512, 3}, Case{t, 40, 2048, 1}, Case{t, 600, 2048, 1},
                          Case{t, 24, 768, 5}, Case{t, 96, 1024, 8}, Case{t, 72, 256, 13}})
      check(int16(), path, k, seed++);
}

TEST_P(PerKernelSet, Int8InterleavedRowsMatchExactProductWithinActivationRounding) {
  LATTE_REQUIRE_INT_PATH(set(), IntPath::kInterleavedRows, int8().supports(ggl::kQ4_0_R8, 32));
  check_interleaved(int8(), Path::kRows, ggl::kQ4_0_R8);
  check_interleaved(int8(), Path::kPanels, ggl::kQ4_0_R8);
}

// The largest sums the interleaved rows path adds up (in 16 bits where the set has no VNNI,
// gemm_rows8_x86.h): every weight at its largest value (Q4_0: 15, value 7; Q8_0: 127) times
// activations all at the top level of either sign, which are exact: value * n * x.
template <class Block>
void check_largest_products(const Api& ig, Type t, int quant, float value) {
  constexpr int64_t n = 256, rows = 16;
  ASSERT_TRUE(ig.supports(t, n)) << ig.name << " " << ggl::type_name(t);
  Block block{};
  block.d = ggl::f32_to_fp16(1.0f);
  std::fill(std::begin(block.qs), std::end(block.qs), static_cast<std::remove_cvref_t<decltype(block.qs[0])>>(quant));
  const std::vector<Block> plain(rows * n / 32, block);
  std::vector<uint8_t> w(plain.size() * sizeof block);
  ggl::interleave_rows(t, reinterpret_cast<const uint8_t*>(plain.data()), w.data(), rows, n);
  for (float sign : {1.0f, -1.0f}) {
    const std::vector<float> x(n, sign);
    Aligned<uint8_t> column(ig.column_bytes(n));
    ig.quantize_column(x.data(), n, column.get());
    std::vector<float> y(rows);
    const void* xs[] = {column.get()};
    float* ys[] = {y.data()};
    ig.multiply_rows(t, w.data(), ggl::row_bytes(t, n), rows, n, xs, ys, 1);
    for (int64_t r = 0; r < rows; ++r)
      ASSERT_FLOAT_EQ(y[r], value * n * sign) << ig.name << " " << ggl::type_name(t) << " row " << r;
  }
}

TEST_P(PerKernelSet, InterleavedRowsLargestProductsDoNotOverflow) {
  LATTE_REQUIRE_INT_PATH(set(), IntPath::kInterleavedRows, int16().supports(ggl::kQ4_0_R8, 256));
  for (const Api* ig : {&int16(), &int8()}) check_largest_products<ggl::BlockQ4_0>(*ig, ggl::kQ4_0_R8, 0xFF, 7.0f);
  check_largest_products<ggl::BlockQ8_0>(int16(), ggl::kQ8_0_R8, 127, 127.0f);
  check_largest_products<ggl::BlockQ8_0>(int16(), ggl::kQ8_0_R8, -127, -127.0f);
}

// Q6_K_R8's largest sums: every quant 0 (value -32) times the scale -128, so each weight is 4096,
// times activations all at the top level of either sign: exact, 4096 * n * x, where a sub-block's
// two halves add up to 2147352576 in the int32 lanes.
TEST_P(PerKernelSet, InterleavedQ6_KLargestProductsDoNotOverflow) {
  constexpr int64_t n = 512, rows = 16;
  LATTE_REQUIRE_INT_PATH(set(), IntPath::kInterleavedRows, int16().supports(ggl::kQ6_K_R8, n));
  ggl::BlockQ6_K block{};
  block.d = ggl::f32_to_fp16(1.0f);
  std::fill(std::begin(block.scales), std::end(block.scales), int8_t{-128});
  const std::vector<ggl::BlockQ6_K> plain(rows * n / 256, block);
  std::vector<uint8_t> w(plain.size() * sizeof block);
  ggl::interleave_rows(ggl::kQ6_K_R8, reinterpret_cast<const uint8_t*>(plain.data()), w.data(), rows, n);
  for (float sign : {1.0f, -1.0f}) {
    const std::vector<float> x(n, sign);
    Aligned<uint8_t> column(int16().column_bytes(n));
    int16().quantize_column(x.data(), n, column.get());
    std::vector<float> y(rows);
    const void* xs[] = {column.get()};
    float* ys[] = {y.data()};
    int16().multiply_rows(ggl::kQ6_K_R8, w.data(), ggl::row_bytes(ggl::kQ6_K_R8, n), rows, n, xs, ys, 1);
    for (int64_t r = 0; r < rows; ++r) ASSERT_FLOAT_EQ(y[r], 4096.0f * n * sign) << "row " << r;
  }
}

TEST_P(PerKernelSet, Int8PanelAndRowTails) {
  LATTE_REQUIRE_INT_PATH(set(), IntPath::kInt8Gemm, has_int8());
  check_tails(int8(), Path::kPanels, {Type::Q4_0, Type::Q4_1});
  check_tails(int8(), Path::kRows, {Type::Q4_0, Type::Q4_1});
}

// Every type of each path, on the sets meant to have it and only there (tests/support/kernel_sets.h):
// the tests above take one type as the sign of a path, and a set that lost one type would
// otherwise run the float path for it unnoticed.
TEST_P(PerKernelSet, TakesEveryTypeOfThePathsItIsMeantToHave) {
  auto should = [&](IntPath p) { return latte::testing::set_should_have(set().isa, p); };
  for (Type t : {Type::Q4_0, Type::Q4_1, Type::Q8_0})
    EXPECT_EQ(int16().supports(t, 64), should(IntPath::kInt16Gemm)) << "16-bit " << ggl::type_name(t);
  for (Type t : {Type::Q4_0, Type::Q4_1})
    EXPECT_EQ(int8().supports(t, 64), should(IntPath::kInt8Gemm)) << "8-bit " << ggl::type_name(t);
  for (Type t : kUnpackedTypes)
    EXPECT_EQ(int16().supports(t, 2048), should(IntPath::kInt16Unpacked)) << ggl::type_name(t);
  for (Type t : {ggl::kQ4_0_R8, ggl::kQ8_0_R8})
    EXPECT_EQ(int16().supports(t, 64), should(IntPath::kInterleavedRows)) << "16-bit " << ggl::type_name(t);
  EXPECT_EQ(int16().supports(ggl::kQ6_K_R8, 256), should(IntPath::kInterleavedRows)) << "16-bit Q6_K_R8";
  EXPECT_EQ(int8().supports(ggl::kQ4_0_R8, 64), should(IntPath::kInterleavedRows)) << "8-bit Q4_0_R8";
}

// Rows must be whole blocks (of 256 values for the super-block types).
TEST_P(PerKernelSet, Int16TakesWholeBlocksOfTheUnpackedTypes) {
  for (Type t : kUnpackedTypes) {
    const int64_t unit = block_values(t);
    EXPECT_FALSE(int16().supports(t, unit == 32 ? unit + 16 : unit + 32)) << ggl::type_name(t);
  }
}

TEST_P(PerKernelSet, Int8TakesOnlyFourBitWeights) {
  EXPECT_FALSE(int8().supports(Type::Q8_0, 64));
  EXPECT_FALSE(int8().supports(ggl::kQ8_0_R8, 64));
  EXPECT_FALSE(int8().supports(Type::F16, 64));
}

TEST_P(PerKernelSet, Int16TakesOnlyBlockQuantizedWeights) {
  EXPECT_FALSE(int16().supports(Type::F32, 64));
  EXPECT_FALSE(int16().supports(Type::F16, 64));
  EXPECT_FALSE(int16().supports(Type::Q4_0, 48));
}

INSTANTIATE_TEST_SUITE_P(Runnable, PerKernelSet, ::testing::ValuesIn(ggl::runnable_cpu_kernels()),
                         [](const auto& info) { return std::string(info.param->isa); });

}  // namespace test_gemm_int
