// The integer rows kernels of the K-quant / IQ4 / Q5 / i-quant types (gemm_kquant.cpp), with every
// kernel set this build has and this CPU runs: rows quantized by the reference quantizer (the
// i-quants: random blocks, which reach every grid point, sign and scale), activation
// columns quantized as the reference engine quantizes them for these types (Q8_K for the
// super-block types, Q8_0 for the 32-value ones), and the kernel's products held to the products
// of the dequantized rows and the dequantized activations, in double. Those are the same integers
// times the same scales, so the only difference allowed is float rounding: a wrong lane, scale,
// min, zero point or bit is far outside the bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/cpu/kernel_set.h"
#include "ggml-like/quant/kquants.h"
#include "ggml-like/quant/legacy.h"
#include "ggml-like/quant/quant.h"
#include "tests/support/random_floats.h"
#include "tests/support/kernel_sets.h"

namespace test_kquant_gemm {

using ggl::Type;

constexpr Type kSuperBlockTypes[] = {Type::Q4_K, Type::Q6_K, Type::Q5_K, Type::Q3_K, Type::Q2_K, Type::IQ4_XS};
constexpr Type kGridIquantTypes[] = {Type::IQ1_S, Type::IQ1_M,   Type::IQ2_XXS, Type::IQ2_XS,
                                     Type::IQ2_S, Type::IQ3_XXS, Type::IQ3_S};
constexpr Type kBlock32Types[] = {Type::Q5_0, Type::Q5_1, Type::IQ4_NL};

bool is_super_block(Type t) {
  return std::find(std::begin(kSuperBlockTypes), std::end(kSuperBlockTypes), t) != std::end(kSuperBlockTypes) ||
         ggl::is_grid_iquant(t);
}

// The GEMM of a kernel set for type t.
const ggl::IntGemm& gemm_for(const ggl::CpuKernels& k, Type t) { return is_super_block(t) ? *k.int8_k : *k.int8_b32; }

// Column c dequantized as the reference engine's activations for type t.
std::vector<float> reference_activations(Type t, const float* x, int64_t n) {
  std::vector<float> out(n);
  if (is_super_block(t)) {
    std::vector<ggl::BlockQ8_K> q(n / ggl::kSuperBlock);
    ggl::quant::quantize_q8_k(x, q.data(), n);
    ggl::quant::dequantize_q8_k(q.data(), out.data(), n);
  } else {
    std::vector<ggl::BlockQ8_0> q(n / ggl::kQuantBlock);
    ggl::quant::quantize_q8_0(x, q.data(), n);
    ggl::quant::dequantize_q8_0(q.data(), out.data(), n);
  }
  return out;
}

struct Case {
  Type type;
  int64_t rows, n, cols;
};

void check(const ggl::IntGemm& gemm, const Case& k, uint32_t seed) {
  SCOPED_TRACE(std::string(ggl::type_name(k.type)) + " rows " + std::to_string(k.rows) + " n " + std::to_string(k.n) +
               " cols " + std::to_string(k.cols));
  ASSERT_TRUE(gemm.supports(k.type, k.n));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const latte::testing::QuantizedRows q = ggl::is_grid_iquant(k.type)
                                              ? latte::testing::random_iquant_rows(k.type, k.rows, k.n, rng)
                                              : latte::testing::quantized_rows(k.type, k.rows, k.n, rng, normal);
  const size_t stride = q.stride;
  const std::vector<uint8_t>& w = q.bytes;
  const std::vector<float>& wf = q.values;
  // Activations with an outlier, a block of zeros and a tiny block, as real hidden states have.
  const std::vector<float> x = latte::testing::hidden_state_like(rng, normal, k.cols, k.n, 37);

  const size_t cb = gemm.column_bytes(k.n);
  ASSERT_EQ(cb % 64, 0u);
  std::vector<uint8_t> raw(cb * k.cols + 64);
  uint8_t* columns = raw.data() + (64 - reinterpret_cast<uintptr_t>(raw.data()) % 64) % 64;
  std::vector<const void*> xs(k.cols);
  std::vector<float*> ys(k.cols);
  std::vector<float> y(k.cols * k.rows, -1.0f);
  for (int64_t c = 0; c < k.cols; ++c) {
    gemm.quantize_column(x.data() + c * k.n, k.n, columns + c * cb);
    xs[c] = columns + c * cb;
    ys[c] = y.data() + c * k.rows;
  }
  gemm.multiply_rows(k.type, w.data(), stride, k.rows, k.n, xs.data(), ys.data(), k.cols);

  for (int64_t c = 0; c < k.cols; ++c) {
    const std::vector<float> xq = reference_activations(k.type, x.data() + c * k.n, k.n);
    for (int64_t r = 0; r < k.rows; ++r) {
      double exact = 0, magnitude = 0;
      for (int64_t i = 0; i < k.n; ++i) {
        const double p = static_cast<double>(wf[r * k.n + i]) * xq[i];
        exact += p;
        magnitude += std::fabs(p);
      }
      ASSERT_NEAR(y[c * k.rows + r], exact, 1e-5 * magnitude + 1e-30) << "row " << r << " column " << c;
    }
  }
}

std::vector<Case> cases_for(Type t) {
  const int64_t unit = is_super_block(t) ? ggl::kSuperBlock : ggl::kQuantBlock;
  std::vector<Case> cases;
  for (int64_t cols = 1; cols <= 8; ++cols)
    for (int64_t rows : {1, 7, 33}) cases.push_back({t, rows, unit * (1 + cols % 3), cols});
  // Rows of DeepSeek-V2-Lite widths, past one 128 KiB block of rows, columns past one pass of 4.
  cases.push_back({t, 101, is_super_block(t) ? 2048 : 1408, 5});
  return cases;
}

class KQuantGemm : public ::testing::TestWithParam<Type> {};

// With every set that has the path; a set meant to have it (the x86 sets, tests/support/kernel_sets.h)
// fails without it, and where no set has it (NEON, generic) the test is skipped, naming them.
TEST_P(KQuantGemm, MatchesDequantizedProductsOnEveryKernelSet) {
  int with_path = 0;
  std::string without;  // the sets without the path
  latte::testing::for_each_kernel_set([&](const ggl::CpuKernels& k) {
    const ggl::IntGemm& gemm = gemm_for(k, GetParam());
    if (!gemm.supports(GetParam(), 2048 + 256)) {
      EXPECT_FALSE(latte::testing::set_should_have(k.isa, latte::testing::IntPath::kInt8KRows))
          << k.isa << " has no 8-bit rows for " << ggl::type_name(GetParam()) << ", which it is meant to have";
      if (!without.empty()) without += ", ";
      without += k.isa;
      return;
    }
    ++with_path;
    uint32_t seed = 1;
    for (const Case& c : cases_for(GetParam())) check(gemm, c, seed++);
  });
  if (with_path == 0 && !HasFailure())
    GTEST_SKIP() << "no kernel set here has 8-bit rows for " << ggl::type_name(GetParam()) << " (" << without
                 << ": the float or 16-bit path runs)";
}

INSTANTIATE_TEST_SUITE_P(SuperBlocks, KQuantGemm, ::testing::ValuesIn(kSuperBlockTypes),
                         [](const auto& info) { return std::string(ggl::type_name(info.param)); });
INSTANTIATE_TEST_SUITE_P(GridIquants, KQuantGemm, ::testing::ValuesIn(kGridIquantTypes),
                         [](const auto& info) { return std::string(ggl::type_name(info.param)); });
INSTANTIATE_TEST_SUITE_P(Blocks32, KQuantGemm, ::testing::ValuesIn(kBlock32Types),
                         [](const auto& info) { return std::string(ggl::type_name(info.param)); });

// A set has the path for all of these types or for none, and only for rows its blocks divide.
TEST(KQuantGemmSupport, WholeFamiliesAndWholeBlocks) {
  latte::testing::for_each_kernel_set([](const ggl::CpuKernels& k) {
    for (std::span<const Type> family :
         {std::span<const Type>(kSuperBlockTypes), std::span<const Type>(kGridIquantTypes),
          std::span<const Type>(kBlock32Types)}) {
      const Type first = family[0];
      const ggl::IntGemm& gemm = gemm_for(k, first);
      const int64_t unit = is_super_block(first) ? ggl::kSuperBlock : ggl::kQuantBlock;
      const bool has = gemm.supports(first, unit);
      for (Type t : family) {
        EXPECT_EQ(gemm.supports(t, 4 * unit), has) << ggl::type_name(t);
        EXPECT_FALSE(gemm.supports(t, unit + 16)) << ggl::type_name(t);
      }
      EXPECT_FALSE(gemm.supports(Type::Q4_0, 4 * unit));
      EXPECT_FALSE(gemm.supports(Type::Q8_0, 4 * unit));
    }
  });
}

}  // namespace test_kquant_gemm
