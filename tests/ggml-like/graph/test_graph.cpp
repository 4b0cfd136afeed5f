// The compute graph and the CPU executor: every op against a naive loop, on strided views,
// broadcasts, several element types and thread counts; and the arena planner's reuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/cpu/attention_int16.h"
#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/core/fp16.h"
#include "ggml-like/graph/graph.h"
#include "ggml-like/graph/graph_plan.h"
#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/cpu/path_counts.h"
#include "ggml-like/quant/quant.h"
#include "tests/support/kernel_sets.h"
#include "tests/support/random_floats.h"

namespace test_graph {

using ggl::Graph;
using ggl::Tensor;
using ggl::Type;

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Tensor* f32_tensor(Graph& g, std::vector<float>& v, std::vector<int64_t> ne, const char* name) {
  return g.external(Type::F32, ne, v.data(), name);
}

std::vector<float> result(const Tensor* t) {
  std::vector<float> out(static_cast<size_t>(t->n_elements()));
  EXPECT_TRUE(t->is_contiguous());
  std::copy_n(reinterpret_cast<const float*>(t->data), out.size(), out.begin());
  return out;
}

// Runs the graph on a backend that stays alive (results live in its arena) for the whole test.
void run(Graph& g, Tensor* out, int threads = 2) {
  static std::vector<std::unique_ptr<ggl::CpuBackend>> backends;
  g.mark_output(out);
  backends.push_back(std::make_unique<ggl::CpuBackend>(threads));
  backends.back()->compute(g);
}

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol * (1.0f + std::fabs(want[i]))) << "at " << i;
}

// sigmoid, silu and swiglu take vectors of exponentials: rows of 37 (whole vectors and a tail on
// every set), values of spread 6, against std::exp, with every kernel set.
TEST(Graph, VectorExponentialsMatchStdExp) {
  const int64_t n = 37, rows = 3;
  std::vector<float> a = random_floats(n * rows, 21, 6.0f), b = random_floats(n * rows, 22);
  latte::testing::for_each_kernel_set([&](const ggl::CpuKernels&) {
    Graph g;
    Tensor* ta = f32_tensor(g, a, {n, rows}, "a");
    Tensor* tb = f32_tensor(g, b, {n, rows}, "b");
    Tensor* sg = g.sigmoid(ta);
    Tensor* sl = g.silu(ta);
    Tensor* sw = g.swiglu(ta, tb);
    g.mark_output(sg);
    g.mark_output(sl);
    run(g, sw, 2);
    std::vector<float> e_sg(a.size()), e_sl(a.size()), e_sw(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      const double s = 1.0 / (1.0 + std::exp(-static_cast<double>(a[i])));
      e_sg[i] = static_cast<float>(s);
      e_sl[i] = static_cast<float>(a[i] * s);
      e_sw[i] = static_cast<float>(a[i] * s * b[i]);
    }
    expect_near_all(result(sg), e_sg, 1e-6f);
    expect_near_all(result(sl), e_sl, 1e-6f);
    expect_near_all(result(sw), e_sw, 1e-6f);
  });
}

TEST(Graph, ElementwiseOpsWithBroadcast) {
  std::vector<float> a = random_floats(6 * 4 * 3, 1), b = random_floats(6 * 1 * 3, 2), s = random_floats(1 * 4, 3);
  for (float& x : b) x = std::fabs(x) + 0.5f;
  Graph g;
  Tensor* ta = f32_tensor(g, a, {6, 4, 3}, "a");
  Tensor* tb = f32_tensor(g, b, {6, 1, 3}, "b");
  Tensor* ts = f32_tensor(g, s, {1, 4}, "s");
  Tensor* sum = g.add(ta, tb);
  Tensor* prod = g.mul(ta, ts);
  Tensor* quot = g.div(ta, tb);
  Tensor* sc = g.scale(ta, 0.5f);
  Tensor* sg = g.sigmoid(ta);
  Tensor* sl = g.silu(ta);
  Tensor* sw = g.swiglu(ta, sum);
  Tensor* rs = g.sum_rows(ta);
  Tensor* sm = g.softmax(ta);
  Tensor* rn = g.rms_norm(ta, 1e-5f);
  for (Tensor* t : {sum, prod, quot, sc, sg, sl, sw, rs, sm}) g.mark_output(t);
  run(g, rn, 3);

  std::vector<float> e_sum(a.size()), e_prod(a.size()), e_quot(a.size()), e_sc(a.size()), e_sg(a.size()),
      e_sl(a.size()), e_sw(a.size()), e_rs(4 * 3), e_sm(a.size()), e_rn(a.size());
  for (int i2 = 0; i2 < 3; ++i2)
    for (int i1 = 0; i1 < 4; ++i1) {
      const int row = i1 + 4 * i2;
      float max = -INFINITY, total = 0, sq = 0;
      for (int i0 = 0; i0 < 6; ++i0) {
        const float x = a[i0 + 6 * row];
        max = std::max(max, x);
        total += x;
        sq += x * x;
      }
      e_rs[row] = total;
      float z = 0;
      for (int i0 = 0; i0 < 6; ++i0) z += std::exp(a[i0 + 6 * row] - max);
      for (int i0 = 0; i0 < 6; ++i0) {
        const int i = i0 + 6 * row;
        const float x = a[i], y = b[i0 + 6 * i2];
        e_sum[i] = x + y;
        e_prod[i] = x * s[i1];
        e_quot[i] = x / y;
        e_sc[i] = x * 0.5f;
        e_sg[i] = 1.0f / (1.0f + std::exp(-x));
        e_sl[i] = x * e_sg[i];
        e_sw[i] = e_sl[i] * e_sum[i];
        e_sm[i] = std::exp(x - max) / z;
        e_rn[i] = x / std::sqrt(sq / 6 + 1e-5f);
      }
    }
  expect_near_all(result(sum), e_sum, 1e-6f);
  expect_near_all(result(prod), e_prod, 1e-6f);
  expect_near_all(result(quot), e_quot, 1e-6f);
  expect_near_all(result(sc), e_sc, 1e-6f);
  expect_near_all(result(sg), e_sg, 1e-6f);
  expect_near_all(result(sl), e_sl, 1e-6f);
  expect_near_all(result(sw), e_sw, 1e-5f);
  expect_near_all(result(rs), e_rs, 1e-5f);
  expect_near_all(result(sm), e_sm, 1e-6f);
  expect_near_all(result(rn), e_rn, 1e-5f);
}

// Weights of each type, and their exactly dequantized values for the reference.
struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

Weights make_weights(Type t, int64_t row_len, int64_t rows, uint32_t seed) {
  Weights w;
  std::vector<float> f = random_floats(static_cast<size_t>(row_len * rows), seed);
  const size_t rb = ggl::row_bytes(t, row_len);
  w.bytes.resize(rb * rows);
  w.values.resize(f.size());
  for (int64_t r = 0; r < rows; ++r) {
    ggl::quantize_row(t, f.data() + r * row_len, w.bytes.data() + r * rb, row_len);
    ggl::dequantize_row(t, w.bytes.data() + r * rb, w.values.data() + r * row_len, row_len);
  }
  return w;
}

Weights as_weights(latte::testing::QuantizedRows rows) { return {std::move(rows.bytes), std::move(rows.values)}; }

class MulMatTypes : public ::testing::TestWithParam<Type> {};

// The integer GEMMs (int_gemm.h) round activations to 16 or 8 bits; test_gemm_int holds them to
// that rounding. Here, with them on, every column must still land where it belongs (a misplaced
// one is off by O(1)); with them off, the float path must match to float rounding.
class IntGemmSwitch {
 public:
  explicit IntGemmSwitch(bool on) { ggl::set_int_gemm_enabled(on); }
  ~IntGemmSwitch() { ggl::set_int_gemm_enabled(true); }
};
// Relative tolerance (see expect_near_all) for N(0, 1) activations: half a 16-bit step is ~4e-5 of
// a block's largest value, half an 8-bit step ~4e-3; both times the |weights| of the row.
float mul_mat_tolerance(Type t, bool int_gemm, int activation_bits) {
  if (!int_gemm || !(t == Type::Q4_0 || t == Type::Q4_1 || t == Type::Q8_0)) return 1e-4f;
  return activation_bits == 16 ? 2e-3f : 0.15f;
}

TEST_P(MulMatTypes, BatchedBroadcastAndPermutedActivations) {
  const Type type = GetParam();
  for (bool int_gemm : {false, true}) {
    const IntGemmSwitch path(int_gemm);
    SCOPED_TRACE(int_gemm ? "integer GEMMs on" : "integer GEMMs off");
    const int64_t K = 64, N = 40, H = 3, M = 5;
    Weights w = make_weights(type, K, N * H, 7);
    // Activations stored [K, H, M] and permuted to [K, M, H] (strided columns).
    std::vector<float> x = random_floats(K * H * M, 8);
    Graph g;
    Tensor* tw = g.external(type, std::vector<int64_t>{K, N, H}, w.bytes.data(), "w");
    Tensor* tx = f32_tensor(g, x, {K, H, M}, "x");
    Tensor* out = g.mul_mat(tw, g.permute(tx, 0, 2, 1, 3));  // [N, M, H]
    Tensor* shared = g.mul_mat(g.view(tw, {K, N, 1, 1}, {tw->nb[0], tw->nb[1], tw->nb[2], tw->nb[3]}, 0),
                               g.permute(tx, 0, 2, 1, 3));  // one matrix for every head
    g.mark_output(shared);
    run(g, out, 3);
    std::vector<float> want(N * M * H), want_shared(N * M * H);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double acc = 0, acc0 = 0;
          for (int64_t k = 0; k < K; ++k) {
            acc += static_cast<double>(w.values[k + K * (n + N * h)]) * x[k + K * (h + H * m)];
            acc0 += static_cast<double>(w.values[k + K * n]) * x[k + K * (h + H * m)];
          }
          want[n + N * (m + M * h)] = static_cast<float>(acc);
          want_shared[n + N * (m + M * h)] = static_cast<float>(acc0);
        }
    expect_near_all(result(out), want, mul_mat_tolerance(type, int_gemm, 16));
    expect_near_all(result(shared), want_shared, mul_mat_tolerance(type, int_gemm, 16));
  }
}

// out[n, m, h] = sum_k w[n, k, h] x[k, m]. Plain types also with rows of a length past the last
// whole 32-value chunk; 1, 3 and 11 columns: tiles of two and a single one, and more than one tile
// call; 3, 5 and 10 chunks of 32 outputs: tiles of several chunks and the chunks left over (and,
// for the block types in integers, more block columns than one prepared vector covers); 20 and 45
// rows (whole groups of 16 rows, a short group and an odd remainder), with every kernel set, the
// integer paths on and off. Which path ran is read from the set's own counts (path_counts.h): the
// block types (Q4_0, Q8_0, the K-quants, IQ4, Q5 and the i-quants) take the 16-bit integer
// product with the integer paths on, on the sets meant to have it (tests/support/kernel_sets.h),
// and the float path everywhere else.
void expect_transposed_product(Type type, const std::vector<int64_t>& row_lengths) {
  const bool plain = type == Type::F32 || type == Type::F16 || type == Type::BF16;
  const int64_t H = 2;
  for (const int64_t K : {20, 45})
    for (const int64_t N : row_lengths)
      for (const int64_t M : {1, 3, 11}) {
        SCOPED_TRACE(::testing::Message() << ggl::type_name(type) << ", K " << K << ", N " << N << ", M " << M);
        std::mt19937 rng(9 + static_cast<uint32_t>(K + N));
        std::normal_distribution<float> normal(0.0f, 1.0f);
        const Weights w = ggl::is_grid_iquant(type)
                              ? as_weights(latte::testing::random_iquant_rows(type, K * H, N, rng))
                              : make_weights(type, N, K * H, 9);
        std::vector<float> x = random_floats(K * M, 10);
        std::vector<float> want(N * M * H);
        for (int64_t h = 0; h < H; ++h)
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              double acc = 0;
              for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(w.values[n + N * (k + K * h)]) * x[k + K * m];
              want[n + N * (m + M * h)] = static_cast<float>(acc);
            }
        for (bool int_gemm : {false, true}) {
          const IntGemmSwitch path(int_gemm);
          SCOPED_TRACE(int_gemm ? "integer paths on" : "integer paths off");
          latte::testing::for_each_kernel_set([&](const ggl::CpuKernels& set) {
            Graph g;
            Tensor* tw = g.external(type, std::vector<int64_t>{N, K, H}, w.bytes.data(), "w");
            Tensor* out = g.mul_mat_t(tw, f32_tensor(g, x, {K, M}, "x"));  // [N, M, H], x broadcast
            const ggl::CpuPathCounts before = ggl::cpu_path_counts(set);
            run(g, out, 2);
            const ggl::CpuPathCounts after = ggl::cpu_path_counts(set);
            expect_near_all(result(out), want, int_gemm && !plain ? 2e-3f : 1e-4f);
            using ggl::CpuPath;
            EXPECT_GT(after[CpuPath::kNode], before[CpuPath::kNode]) << set.isa << "'s own kernels ran";
            const bool integer = int_gemm && !plain &&
                                 latte::testing::set_should_have(set.isa, latte::testing::IntPath::kTransposedInt16);
            EXPECT_EQ(after[CpuPath::kTransposedInt16] - before[CpuPath::kTransposedInt16], integer ? 1u : 0u)
                << "the 16-bit integer transposed product, " << set.isa;
          });
        }
      }
}

TEST_P(MulMatTypes, TransposedWeights) {
  const Type type = GetParam();
  const bool plain = type == Type::F32 || type == Type::F16 || type == Type::BF16;
  expect_transposed_product(type, plain ? std::vector<int64_t>{96, 100, 160} : std::vector<int64_t>{96, 160, 320});
}

// MLA's query absorption through an attn_kv_b of each block type the unpacking has (the rows of
// 256-value super-blocks: one, and three with a part of a column group).
class TransposedBlockTypes : public ::testing::TestWithParam<Type> {};
TEST_P(TransposedBlockTypes, TakeTheIntegerProduct) {
  const Type type = GetParam();
  expect_transposed_product(
      type, ggl::traits(type).block_size == 32 ? std::vector<int64_t>{96, 320} : std::vector<int64_t>{256, 768});
}
INSTANTIATE_TEST_SUITE_P(Types, TransposedBlockTypes,
                         ::testing::Values(Type::Q2_K, Type::Q3_K, Type::Q4_K, Type::Q5_K, Type::Q6_K, Type::IQ4_XS,
                                           Type::IQ4_NL, Type::Q5_0, Type::Q5_1, Type::IQ2_XXS, Type::IQ2_XS,
                                           Type::IQ2_S, Type::IQ3_XXS, Type::IQ3_S, Type::IQ1_S, Type::IQ1_M),
                         [](const auto& info) { return std::string(ggl::type_name(info.param)); });

TEST_P(MulMatTypes, ExpertsSelectedPerToken) {
  const Type type = GetParam();
  for (bool int_gemm : {false, true}) {
    const IntGemmSwitch path(int_gemm);
    SCOPED_TRACE(int_gemm ? "integer GEMMs on" : "integer GEMMs off");
    const int64_t K = 32, N = 24, E = 5, k_used = 2, T = 7;
    Weights w = make_weights(type, K, N * E, 11);
    std::vector<float> x = random_floats(K * T, 12);
    std::vector<int32_t> ids(k_used * T);
    for (int64_t t = 0; t < T; ++t) {
      ids[k_used * t] = static_cast<int32_t>(t % E);
      ids[k_used * t + 1] = static_cast<int32_t>((3 * t + 1) % E);
    }
    Graph g;
    Tensor* tw = g.external(type, std::vector<int64_t>{K, N, E}, w.bytes.data(), "w");
    Tensor* tids = g.external(Type::I32, std::vector<int64_t>{k_used, T}, ids.data(), "ids");
    Tensor* out = g.mul_mat_id(tw, f32_tensor(g, x, {K, 1, T}, "x"), tids);
    run(g, out, 3);
    std::vector<float> want(N * k_used * T);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < k_used; ++i)
        for (int64_t n = 0; n < N; ++n) {
          double acc = 0;
          const int64_t e = ids[i + k_used * t];
          for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(w.values[k + K * (n + N * e)]) * x[k + K * t];
          want[n + N * (i + k_used * t)] = static_cast<float>(acc);
        }
    // Routed experts with 4-bit weights take 8-bit activations.
    expect_near_all(result(out), want, mul_mat_tolerance(type, int_gemm, type == Type::Q4_0 ? 8 : 16));
  }
}

// A mul_mat marked ActivationPrecision::kCoarse (graph.h) takes the 8-bit activations a decode
// step's routed experts take: with Q4_K weights and one column, the set's 8-bit K-quant rows (on a
// set without them, the 16-bit GEMM); the default kFine, the 16-bit GEMM. Both against a
// double-precision loop, with every kernel set; the paths are read from the set's own counts, on
// the sets meant to have them.
TEST(Graph, CoarseActivationPrecisionTakesTheEightBitRows) {
  const int64_t K = 512, N = 48;
  Weights w = make_weights(Type::Q4_K, K, N, 31);
  std::vector<float> x = random_floats(K, 32);
  std::vector<float> want(N);
  for (int64_t n = 0; n < N; ++n) {
    double acc = 0;
    for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(w.values[k + K * n]) * x[k];
    want[n] = static_cast<float>(acc);
  }
  using ggl::ActivationPrecision;
  using ggl::CpuPath;
  for (ActivationPrecision precision : {ActivationPrecision::kFine, ActivationPrecision::kCoarse}) {
    const bool coarse = precision == ActivationPrecision::kCoarse;
    SCOPED_TRACE(coarse ? "kCoarse" : "kFine");
    latte::testing::for_each_kernel_set([&](const ggl::CpuKernels& set) {
      Graph g;
      Tensor* tw = g.external(Type::Q4_K, std::vector<int64_t>{K, N}, w.bytes.data(), "w");
      Tensor* out = g.mul_mat(tw, f32_tensor(g, x, {K, 1}, "x"), precision);
      EXPECT_EQ(ggl::activation_precision(*out), precision);
      const ggl::CpuPathCounts before = ggl::cpu_path_counts(set);
      run(g, out, 2);
      const ggl::CpuPathCounts after = ggl::cpu_path_counts(set);
      // Rounding x to steps of max|x| / 127 (or / 16383) adds to each result a sum of K products of
      // N(0, 1) weights and uniform errors of half a step: a standard deviation of
      // step * sqrt(K / 12). Every result within 6 of them.
      const float step =
          *std::max_element(x.begin(), x.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); });
      const float sigma = std::fabs(step) / (coarse ? 127.0f : 16383.0f) * std::sqrt(K / 12.0f);
      const std::vector<float> got = result(out);
      for (int64_t n = 0; n < N; ++n) ASSERT_NEAR(got[n], want[n], 6 * sigma) << "row " << n << ", " << set.isa;
      const bool rows8 = coarse && latte::testing::set_should_have(set.isa, latte::testing::IntPath::kInt8KRows);
      // Without 8-bit K-quant rows (the NEON sets), a kCoarse product takes the 16-bit GEMM too.
      const bool gemm16 = !rows8 && latte::testing::set_should_have(set.isa, latte::testing::IntPath::kInt16Unpacked);
      EXPECT_EQ(after[CpuPath::kInt8KRows] - before[CpuPath::kInt8KRows], rows8 ? 1u : 0u) << set.isa;
      EXPECT_EQ(after[CpuPath::kInt16Gemm] - before[CpuPath::kInt16Gemm], gemm16 ? 1u : 0u) << set.isa;
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MulMatTypes,
                         ::testing::Values(Type::F32, Type::F16, Type::BF16, Type::Q8_0, Type::Q4_0),
                         [](const auto& info) { return std::string(ggl::type_name(info.param)); });

TEST(Graph, GetRowsDequantizes) {
  Weights w = make_weights(Type::Q8_0, 64, 10, 13);
  std::vector<int32_t> ids = {3, 0, 9, 3};
  Graph g;
  Tensor* table = g.external(Type::Q8_0, std::vector<int64_t>{64, 10}, w.bytes.data(), "table");
  Tensor* out = g.get_rows(table, g.input_i32(ids, "ids"));
  run(g, out);
  std::vector<float> want;
  for (int32_t id : ids) want.insert(want.end(), w.values.begin() + id * 64, w.values.begin() + (id + 1) * 64);
  expect_near_all(result(out), want, 0.0f);
}

TEST(Graph, RopeAdjacentPairsAndYarn) {
  const int64_t D = 12, H = 2, T = 3;
  const int n_rot = 8;
  std::vector<float> x = random_floats(D * H * T, 14);
  std::vector<int32_t> pos = {0, 5, 130};
  for (bool yarn : {false, true}) {
    ggl::RopeParams p;
    p.n_rot = n_rot;
    p.freq_base = 10000.0f;
    if (yarn) {
      p.freq_scale = 0.25f;
      p.ext_factor = 1.0f;
      p.n_ctx_orig = 64;
    }
    Graph g;
    Tensor* out = g.rope(f32_tensor(g, x, {D, H, T}, "x"), g.input_i32(pos, "pos"), p);
    run(g, out);
    // Reference: the YaRN ramp between the dimensions for 32 and 1 rotations over 64 positions.
    auto corr = [&](float rot) {
      return n_rot * std::log(64 / (rot * 2 * static_cast<float>(M_PI))) / (2 * std::log(10000.0f));
    };
    const float low = std::max(0.0f, std::floor(corr(32))), high = std::min(n_rot - 1.0f, std::ceil(corr(1)));
    std::vector<float> want(x);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int i = 0; i < n_rot / 2; ++i) {
          const double orig = pos[t] * std::pow(10000.0, -2.0 * i / n_rot);
          double theta = orig;
          if (yarn) {
            const double ramp = 1.0 - std::clamp((i - low) / std::max(0.001f, high - low), 0.0f, 1.0f);
            theta = orig * 0.25 * (1 - ramp) + orig * ramp;
          }
          const int64_t base = D * (h + H * t);
          const float x0 = x[base + 2 * i], x1 = x[base + 2 * i + 1];
          want[base + 2 * i] = static_cast<float>(x0 * std::cos(theta) - x1 * std::sin(theta));
          want[base + 2 * i + 1] = static_cast<float>(x0 * std::sin(theta) + x1 * std::cos(theta));
        }
    expect_near_all(result(out), want, 1e-5f);
  }
}

TEST(Graph, TopKAndGroupLimitedTopK) {
  std::vector<float> v = {0.1f, 0.9f, 0.3f, 0.9f, 0.5f, 0.2f, 0.8f, 0.0f,   // token 0
                          1.0f, 0.0f, 0.0f, 0.0f, 0.6f, 0.6f, 0.1f, 0.7f};  // token 1
  Graph g;
  Tensor* tv = f32_tensor(g, v, {8, 2}, "v");
  Tensor* plain = g.top_k(tv, {3, 1, 1});
  Tensor* grouped = g.top_k(tv, {2, 4, 2});  // groups of 2, keep the best 2 groups
  g.mark_output(plain);
  run(g, grouped);
  auto ids = [](const Tensor* t) {
    const auto* p = reinterpret_cast<const int32_t*>(t->data);
    return std::vector<int32_t>(p, p + t->n_elements());
  };
  EXPECT_EQ(ids(plain), (std::vector<int32_t>{1, 3, 6, 0, 7, 4}));  // ties: lower index first
  // token 0 group sums: 1.0, 1.2, 0.7, 0.8 -> groups 1, 0 -> experts {0,1,2,3}: 1, 3
  // token 1 group sums: 1.0, 0.0, 1.2, 0.8 -> groups 2, 0 -> experts {0,1,4,5}: 0, 4
  EXPECT_EQ(ids(grouped), (std::vector<int32_t>{1, 3, 0, 4}));
}

TEST(Graph, ConcatBroadcastContAndCopy) {
  std::vector<float> a = random_floats(4 * 3 * 2, 15), b = random_floats(2 * 1 * 2, 16);
  std::vector<uint16_t> cache(8 * 5, 0);
  Graph g;
  Tensor* ta = f32_tensor(g, a, {4, 3, 2}, "a");
  Tensor* tb = f32_tensor(g, b, {2, 1, 2}, "b");
  Tensor* cat = g.concat(ta, tb, 0);   // [6, 3, 2], b repeated over dim 1
  Tensor* cat1 = g.concat(ta, ta, 1);  // [4, 6, 2]
  Tensor* tc = g.external(Type::F16, std::vector<int64_t>{8, 5}, cache.data(), "cache");
  // Write a's first two rows of batch 1 into cache rows 2..3, columns 1..4 (a strided view).
  Tensor* src = g.view(ta, {4, 2, 1, 1}, {4, 16, 48, 48}, 48);
  Tensor* dst = g.view(tc, {4, 2, 1, 1}, {2, 16, 32, 32}, 2 * 16 + 2);
  g.copy(src, dst);
  Tensor* back = g.cont(g.view(tc, {4, 2, 1, 1}, {2, 16, 32, 32}, 2 * 16 + 2));
  g.mark_output(cat);
  g.mark_output(cat1);
  run(g, back);
  std::vector<float> e_cat, e_cat1, e_back;
  for (int i2 = 0; i2 < 2; ++i2)
    for (int i1 = 0; i1 < 3; ++i1) {
      for (int i0 = 0; i0 < 4; ++i0) e_cat.push_back(a[i0 + 4 * (i1 + 3 * i2)]);
      for (int i0 = 0; i0 < 2; ++i0) e_cat.push_back(b[i0 + 2 * i2]);
    }
  for (int i2 = 0; i2 < 2; ++i2)
    for (int i1 = 0; i1 < 6; ++i1)
      for (int i0 = 0; i0 < 4; ++i0) e_cat1.push_back(a[i0 + 4 * (i1 % 3 + 3 * i2)]);
  for (int i1 = 0; i1 < 2; ++i1)
    for (int i0 = 0; i0 < 4; ++i0) e_back.push_back(ggl::fp16_to_f32(ggl::f32_to_fp16(a[12 + i0 + 4 * i1])));
  expect_near_all(result(cat), e_cat, 0.0f);
  expect_near_all(result(cat1), e_cat1, 0.0f);
  expect_near_all(result(back), e_back, 0.0f);
  EXPECT_EQ(cache[0], 0);
  EXPECT_EQ(cache[2 * 8], 0);
  EXPECT_NE(cache[2 * 8 + 1], 0);
}

// Naive attention: full scores, causal by position, softmax, weighted sum.
std::vector<float> naive_attention(const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v, const std::vector<int32_t>& pos, int64_t Dk, int64_t Dv,
                                   int64_t H, int64_t Hkv, int64_t T, int64_t Nkv, float scale) {
  std::vector<float> out(Dv * H * T);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t hk = h / (H / Hkv);
      std::vector<double> s;
      for (int64_t j = 0; j <= std::min<int64_t>(pos[t], Nkv - 1); ++j) {
        double d = 0;
        for (int64_t i = 0; i < Dk; ++i) d += q[i + Dk * (h + H * t)] * k[i + Dk * (hk + Hkv * j)];
        s.push_back(d * scale);
      }
      const double m = *std::max_element(s.begin(), s.end());
      double z = 0;
      for (double& x : s) z += (x = std::exp(x - m));
      for (int64_t i = 0; i < Dv; ++i) {
        double acc = 0;
        for (size_t j = 0; j < s.size(); ++j) acc += s[j] * v[i + Dv * (hk + Hkv * j)];
        out[i + Dv * (h + H * t)] = static_cast<float>(acc / z);
      }
    }
  return out;
}

// MHA prefill with float32 K and V, and groups of 16 or more heads, run on 16-bit integers where
// they can (attention_int16.h): their rounding (~6e-5 of each 32-element block's largest value,
// ~2e-4 of the outputs here) against a misplaced key, lane or pair, which is off by 0.1 or more.
// Everything else is float32.
float attention_tolerance(const Tensor& out) { return ggl::attention_int16_applies(out) ? 3e-3f : 2e-5f; }

struct AttnCase {
  int64_t H, Hkv, T, Nkv;
  Type kv_type;
  int threads;
};

class FlashAttn : public ::testing::TestWithParam<AttnCase> {};

TEST_P(FlashAttn, MatchesNaiveAttention) {
  const AttnCase c = GetParam();
  const int64_t Dk = 64, Dv = 32;
  std::vector<float> q = random_floats(Dk * c.H * c.T, 17), k = random_floats(Dk * c.Hkv * c.Nkv, 18),
                     v = random_floats(Dv * c.Hkv * c.Nkv, 19);
  std::vector<int32_t> pos(c.T);
  for (int64_t t = 0; t < c.T; ++t) pos[t] = static_cast<int32_t>(c.Nkv - c.T + t);
  // K/V stored in the requested type; the reference uses the stored (rounded) values.
  Weights kw, vw;
  kw.bytes.resize(ggl::row_bytes(c.kv_type, Dk) * c.Hkv * c.Nkv);
  vw.bytes.resize(ggl::row_bytes(c.kv_type, Dv) * c.Hkv * c.Nkv);
  for (int64_t r = 0; r < c.Hkv * c.Nkv; ++r) {
    ggl::quantize_row(c.kv_type, k.data() + r * Dk, kw.bytes.data() + r * ggl::row_bytes(c.kv_type, Dk), Dk);
    ggl::dequantize_row(c.kv_type, kw.bytes.data() + r * ggl::row_bytes(c.kv_type, Dk), k.data() + r * Dk, Dk);
    ggl::quantize_row(c.kv_type, v.data() + r * Dv, vw.bytes.data() + r * ggl::row_bytes(c.kv_type, Dv), Dv);
    ggl::dequantize_row(c.kv_type, vw.bytes.data() + r * ggl::row_bytes(c.kv_type, Dv), v.data() + r * Dv, Dv);
  }
  Graph g;
  Tensor* tq = f32_tensor(g, q, {Dk, c.H, c.T}, "q");
  Tensor* tk = g.external(c.kv_type, std::vector<int64_t>{Dk, c.Hkv, c.Nkv}, kw.bytes.data(), "k");
  Tensor* tv = g.external(c.kv_type, std::vector<int64_t>{Dv, c.Hkv, c.Nkv}, vw.bytes.data(), "v");
  Tensor* out = g.flash_attn(tq, tk, tv, g.input_i32(pos, "pos"), 0.3f);
  const std::vector<float> want = naive_attention(q, k, v, pos, Dk, Dv, c.H, c.Hkv, c.T, c.Nkv, 0.3f);
  latte::testing::for_each_kernel_set([&](const ggl::CpuKernels&) {
    run(g, out, c.threads);
    expect_near_all(result(out), want, attention_tolerance(*out));
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttn,
                         ::testing::Values(AttnCase{4, 4, 5, 5, Type::F32, 2},    // MHA prefill
                                           AttnCase{8, 2, 3, 9, Type::F16, 3},    // GQA, cached prefix
                                           AttnCase{6, 1, 1, 17, Type::BF16, 4},  // MQA decode: keys split
                                           AttnCase{6, 1, 1, 2, Type::F16, 4},    // fewer keys than threads
                                           AttnCase{4, 1, 4, 40, Type::Q8_0, 2},
                                           // Heads on lanes: a full chunk of 16 and a partial one
                                           // (part of a vector), keys split across threads, a
                                           // depth that is not a multiple of the 32-key block.
                                           AttnCase{20, 1, 1, 77, Type::F16, 2},
                                           AttnCase{12, 1, 1, 70, Type::F32, 1},  // one thread
                                           AttnCase{24, 2, 2, 50, Type::F16, 2},  // GQA, 12 per group
                                           // Tokens on lanes, causal: 20 tokens (3 of 4 AVX2
                                           // vectors), 37 from position 0 (a pass of 32 and one
                                           // of 5). F16 K/V keep them on the float kernel.
                                           AttnCase{2, 2, 20, 45, Type::F16, 2}, AttnCase{3, 3, 37, 37, Type::F16, 3},
                                           // GQA groups of 32 (the AVX-512 set's integer kernel):
                                           // separate K and V rows, Q8_0 and F16, a pass per
                                           // token and KV head; one token, keys split.
                                           AttnCase{64, 2, 3, 45, Type::Q8_0, 2},
                                           AttnCase{32, 1, 1, 61, Type::F16, 2}));

// The integer MHA kernel in its real shapes (DeepSeek's 192 / 128 head sizes): two passes of
// tokens (the second partial), an odd number of keys (a padded key pair), several key blocks and
// the causal mask; and the float kernel on the same data with integer paths off; with every kernel
// set (the float kernel runs in all of them, the integer one where the set has it).
TEST(Graph, FlashAttnMhaPrefillOnIntegersMatchesNaiveAttention) {
  const int64_t Dk = 192, Dv = 128, H = 3, T = 37, N = 101;
  std::vector<float> q = random_floats(Dk * H * T, 41), k = random_floats(Dk * H * N, 42),
                     v = random_floats(Dv * H * N, 43);
  for (int64_t i = 0; i < Dk * H * N; i += Dk) k[i + 150] *= 20.0f;  // an outlier in one block
  std::vector<int32_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(N - T + t);
  const std::vector<float> want = naive_attention(q, k, v, pos, Dk, Dv, H, H, T, N, 0.1f);
  latte::testing::for_each_kernel_set([&](const ggl::CpuKernels& set) {
    for (bool int_paths : {true, false}) {
      const IntGemmSwitch path(int_paths);
      Graph g;
      Tensor* out = g.flash_attn(f32_tensor(g, q, {Dk, H, T}, "q"), f32_tensor(g, k, {Dk, H, N}, "k"),
                                 f32_tensor(g, v, {Dv, H, N}, "v"), g.input_i32(pos, "pos"), 0.1f);
      if (int_paths && !ggl::attention_int16_applies(*out)) {
        EXPECT_FALSE(latte::testing::set_should_have(set.isa, latte::testing::IntPath::kMhaInt16))
            << set.isa << " has no integer MHA kernel, which it is meant to have";
        std::printf("[note] kernel set %s has no integer MHA kernel: only its float kernel is checked\n", set.isa);
        continue;
      }
      EXPECT_EQ(ggl::attention_int16_applies(*out), int_paths);
      run(g, out, 2);
      SCOPED_TRACE(int_paths ? "integer kernel" : "float kernel");
      expect_near_all(result(out), want, attention_tolerance(*out));
    }
  });
}

// MLA-style MQA: K rows hold [latent ; rope], V is the latent prefix of the same rows.
struct AbsorbedCase {
  int64_t L, R, H, T, N;
  int threads;
  Type cache_type = Type::F32;
};

class AbsorbedAttention : public ::testing::TestWithParam<AbsorbedCase> {};

TEST_P(AbsorbedAttention, ReadsValuesInsideKeys) {
  const AbsorbedCase c = GetParam();
  const int64_t Dk = c.L + c.R;
  std::vector<float> rows = random_floats(Dk * c.N, 20), q = random_floats(Dk * c.H * c.T, 21);
  std::vector<int32_t> pos(c.T);
  for (int64_t t = 0; t < c.T; ++t) pos[t] = static_cast<int32_t>(c.N - c.T + t);
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dk));
  // The cache in its type; the reference uses the stored (rounded) rows.
  const size_t row = ggl::row_bytes(c.cache_type, Dk), elem = ggl::traits(c.cache_type).block_bytes;
  Weights stored;
  stored.bytes.resize(row * c.N);
  for (int64_t j = 0; j < c.N; ++j) {
    ggl::quantize_row(c.cache_type, rows.data() + j * Dk, stored.bytes.data() + j * row, Dk);
    ggl::dequantize_row(c.cache_type, stored.bytes.data() + j * row, rows.data() + j * Dk, Dk);
  }
  Graph g;
  Tensor* cache = g.external(c.cache_type, std::vector<int64_t>{Dk, c.N}, stored.bytes.data(), "cache");
  Tensor* k = g.view(cache, {Dk, 1, c.N, 1}, {elem, row, row, row * c.N}, 0);
  Tensor* v = g.view(cache, {c.L, 1, c.N, 1}, {elem, row, row, row * c.N}, 0);
  Tensor* out = g.flash_attn(f32_tensor(g, q, {Dk, c.H, c.T}, "q"), k, v, g.input_i32(pos, "pos"), scale);
  std::vector<float> vv;
  for (int64_t j = 0; j < c.N; ++j) vv.insert(vv.end(), rows.begin() + j * Dk, rows.begin() + j * Dk + c.L);
  const std::vector<float> want = naive_attention(q, rows, vv, pos, Dk, c.L, c.H, 1, c.T, c.N, scale);
  // With 16 or more heads, the integer kernel where the set has it, and the float one with integer
  // paths off.
  latte::testing::for_each_kernel_set([&](const ggl::CpuKernels& set) {
    for (bool int_paths : {true, false}) {
      const IntGemmSwitch path(int_paths);
      if (int_paths && !ggl::attention_int16_applies(*out)) {
        // The grouped-head integer kernel takes 32 or more heads (docs/cpu-kernels.md).
        EXPECT_FALSE(c.H >= 32 && latte::testing::set_should_have(set.isa, latte::testing::IntPath::kGroupedInt16))
            << set.isa << " has no integer kernel for " << c.H << " heads, which it is meant to have";
        std::printf("[note] kernel set %s takes the float kernel for %lld heads\n", set.isa,
                    static_cast<long long>(c.H));
        continue;
      }
      SCOPED_TRACE(int_paths ? "integer kernel" : "float kernel");
      EXPECT_EQ(ggl::attention_int16_applies(*out), int_paths);
      run(g, out, c.threads);
      expect_near_all(result(out), want, attention_tolerance(*out));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, AbsorbedAttention,
                         ::testing::Values(AbsorbedCase{32, 16, 3, 1, 6, 2},
                                           // DeepSeek's latent cache (512 + 64): V2-Lite's 16
                                           // heads and V3's 128 in decode, keys split across
                                           // threads; and a causal prefill over a cached prefix.
                                           AbsorbedCase{512, 64, 16, 1, 77, 2}, AbsorbedCase{512, 64, 128, 1, 40, 2},
                                           AbsorbedCase{512, 64, 16, 5, 70, 2},
                                           // The cache types, with heads enough for the AVX-512
                                           // set's integer kernel: 40 (a full pass of 32 and a
                                           // partial one), keys split across 3 threads, an odd
                                           // depth (a half key pair), the Q8_0 rows read as they
                                           // are stored; and a prefill of 3 tokens (a pass per
                                           // token and chunk, causal) over an F16 cache.
                                           AbsorbedCase{512, 64, 40, 1, 77, 3, Type::Q8_0},
                                           AbsorbedCase{512, 64, 32, 1, 33, 2, Type::F16},
                                           AbsorbedCase{512, 64, 64, 3, 70, 2, Type::F16},
                                           AbsorbedCase{512, 64, 32, 2, 45, 2, Type::BF16}));

TEST(Graph, ArenaReusesDeadResults) {
  // A chain x -> f1 -> f2 -> ... : only two results are ever alive at once.
  std::vector<float> x = random_floats(1024, 22);
  Graph g;
  Tensor* t = f32_tensor(g, x, {1024}, "x");
  for (int i = 0; i < 20; ++i) t = g.scale(t, 1.01f);
  g.mark_output(t);
  const ggl::ArenaPlan plan = ggl::plan_arena(g);
  EXPECT_LE(plan.size, 2 * 1024 * sizeof(float));
  EXPECT_EQ(plan.naive_size, 20 * 1024 * sizeof(float));
  run(g, t, 2);
  std::vector<float> got = result(t);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(got[i], x[i] * std::pow(1.01f, 20), 1e-4f * (1 + std::fabs(x[i])));
}

TEST(Graph, PlansAreReusedForGraphsOfTheSameShape) {
  // Views of a longer external buffer (like a growing cache) do not change the plan.
  std::vector<float> x = random_floats(64 * 10, 25);
  ggl::PlanCache cache;
  auto build = [&](Graph& g, int64_t rows) {
    Tensor* t = g.view(f32_tensor(g, x, {64, 10}, "x"), {64, rows, 1, 1},
                       {4, 256, static_cast<size_t>(256 * rows), static_cast<size_t>(256 * rows)}, 0);
    g.mark_output(g.scale(g.sum_rows(t), 2.0f));
  };
  Graph a, b, c;
  build(a, 4);
  build(b, 4);
  build(c, 7);
  cache.plan(a);
  cache.plan(b);
  EXPECT_EQ(cache.hits(), 1u);
  cache.plan(c);  // results of another size: another plan
  EXPECT_EQ(cache.misses(), 2u);
  EXPECT_NE(ggl::plan_signature(a), ggl::plan_signature(c));
}

TEST(Graph, ResultsDoNotDependOnThreadCount) {
  const int64_t K = 64, N = 50, T = 9;
  Weights w = make_weights(Type::Q8_0, K, N, 23);
  std::vector<float> x = random_floats(K * T, 24);
  std::vector<float> first;
  for (int threads : {1, 2, 5}) {
    Graph g;
    Tensor* h = g.mul_mat(g.external(Type::Q8_0, std::vector<int64_t>{K, N}, w.bytes.data(), "w"),
                          f32_tensor(g, x, {K, T}, "x"));
    Tensor* out = g.softmax(g.rms_norm(h, 1e-6f));
    run(g, out, threads);
    if (first.empty())
      first = result(out);
    else
      EXPECT_EQ(result(out), first) << threads << " threads";
  }
}

TEST(Graph, ShapeErrorsNameTheOp) {
  std::vector<float> a(12), b(10);
  Graph g;
  Tensor* ta = f32_tensor(g, a, {4, 3}, "a");
  Tensor* tb = f32_tensor(g, b, {5, 2}, "b");
  try {
    g.mul_mat(ta, tb);
    FAIL() << "no error";
  } catch (const ggl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("mul_mat"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[4, 3]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(g.add(ta, tb), ggl::Error);
}

}  // namespace test_graph
