// Batch-invariant graphs (graph.h, cpu_backend.h): a token's results from a node of many tokens on
// one or two threads are bit-identical to the same token alone on two threads, with every kernel set this
// CPU runs: matrix products of each weight kind (the integer GEMMs' panels and rows, the 8-bit
// routed experts), and attention with one KV head for 32 heads (MLA's absorbed form, the 16-bit
// grouped kernel where the set has it), 4 heads (the float kernel's heads on lanes) and MHA (one
// head per KV head), over more keys than one of the fixed key chunks. Without the flag the same
// comparisons differ somewhere (the paths chosen by the number of columns and threads round
// differently), which the last test shows.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/graph/graph.h"
#include "ggml-like/quant/quant.h"
#include "tests/support/kernel_sets.h"
#include "tests/support/random_floats.h"

namespace test_batch_invariant {

using ggl::Graph;
using ggl::Tensor;
using ggl::Type;

// A node over `tokens` tokens starting at token `first` (the graph's own inputs: a slice of the
// test's), and the floats of one token's output.
using Build = std::function<Tensor*(Graph&, int64_t first, int64_t tokens)>;

std::vector<float> run(const Build& build, int64_t first, int64_t tokens, int threads, bool invariant) {
  Graph g;
  g.set_batch_invariant(invariant);
  Tensor* out = build(g, first, tokens);
  g.mark_output(out);
  ggl::CpuBackend cpu(threads);  // (its arena holds the output)
  cpu.compute(g);
  const float* y = out->f32_row(0, 0, 0);
  return {y, y + out->ne[0] * out->ne[1] * out->ne[2]};
}

// How many of the tokens come out bit-identical alone (on two threads, which then share the
// token's work) and in the node of all of them (on one thread, and on two).
int identical_tokens(const Build& build, int64_t tokens, bool invariant) {
  const std::vector<float> all1 = run(build, 0, tokens, 1, invariant);
  const std::vector<float> all2 = run(build, 0, tokens, 2, invariant);
  const size_t per_token = all1.size() / static_cast<size_t>(tokens);
  int identical = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    const std::vector<float> one = run(build, t, 1, 2, invariant);
    EXPECT_EQ(one.size(), per_token);
    const size_t bytes = per_token * sizeof(float);
    identical += std::memcmp(one.data(), all1.data() + t * per_token, bytes) == 0 &&
                 std::memcmp(one.data(), all2.data() + t * per_token, bytes) == 0;
  }
  return identical;
}

std::vector<uint8_t> weights(Type t, int64_t n, int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  return latte::testing::quantized_rows(t, rows, n, rng, normal).bytes;
}

constexpr int64_t kTokens = 12;

// w [256, 64] of type t times 12 activation columns.
struct Product {
  Type type;
  std::vector<uint8_t> w;
  std::vector<float> x;
  explicit Product(Type t) : type(t), w(weights(t, 256, 64, 3)), x(latte::testing::random_floats(256 * kTokens, 4)) {}
  Build build() const {
    return [this](Graph& g, int64_t first, int64_t tokens) {
      return g.mul_mat(g.external(type, std::vector<int64_t>{256, 64}, w.data(), "w"),
                       g.external(Type::F32, std::vector<int64_t>{256, tokens}, x.data() + first * 256, "x"));
    };
  }
};

// 8 experts [256, 64] of type t, 2 per token, the choices spread so that experts get 1 to 6 tokens.
struct Experts {
  Type type;
  std::vector<uint8_t> w;
  std::vector<float> x;
  std::vector<int32_t> ids;
  explicit Experts(Type t)
      : type(t), w(weights(t, 256, 64 * 8, 5)), x(latte::testing::random_floats(256 * kTokens, 6)) {
    for (int64_t i = 0; i < kTokens; ++i) {
      ids.push_back(static_cast<int32_t>(i % 3));
      ids.push_back(static_cast<int32_t>(3 + i * 5 % 5));
    }
  }
  Build build() const {
    return [this](Graph& g, int64_t first, int64_t tokens) {
      return g.mul_mat_id(g.external(type, std::vector<int64_t>{256, 64, 8}, w.data(), "w"),
                          g.external(Type::F32, std::vector<int64_t>{256, 1, tokens}, x.data() + first * 256, "x"),
                          g.external(Type::I32, std::vector<int64_t>{2, tokens}, ids.data() + first * 2, "ids"));
    };
  }
};

// Queries of 12 tokens at positions 588..599 over 600 cached keys (three chunks), `heads` query
// heads on `kv_heads` KV heads, an F16 cache.
struct Attention {
  int64_t heads, kv_heads;
  static constexpr int64_t kDk = 64, kDv = 32, kKeys = 600;
  std::vector<float> q;
  std::vector<uint8_t> k, v;
  std::vector<int32_t> pos;
  Attention(int64_t h, int64_t hkv) : heads(h), kv_heads(hkv), q(latte::testing::random_floats(kDk * h * kTokens, 7)) {
    const std::vector<float> kf = latte::testing::random_floats(kDk * hkv * kKeys, 8);
    const std::vector<float> vf = latte::testing::random_floats(kDv * hkv * kKeys, 9);
    k.resize(ggl::row_bytes(Type::F16, kDk) * hkv * kKeys);
    v.resize(ggl::row_bytes(Type::F16, kDv) * hkv * kKeys);
    for (int64_t r = 0; r < hkv * kKeys; ++r) {
      ggl::quantize_row(Type::F16, kf.data() + r * kDk, k.data() + r * ggl::row_bytes(Type::F16, kDk), kDk);
      ggl::quantize_row(Type::F16, vf.data() + r * kDv, v.data() + r * ggl::row_bytes(Type::F16, kDv), kDv);
    }
    for (int64_t t = 0; t < kTokens; ++t) pos.push_back(static_cast<int32_t>(kKeys - kTokens + t));
  }
  Build build() const {
    return [this](Graph& g, int64_t first, int64_t tokens) {
      return g.flash_attn(
          g.external(Type::F32, std::vector<int64_t>{kDk, heads, tokens}, q.data() + first * kDk * heads, "q"),
          g.external(Type::F16, std::vector<int64_t>{kDk, kv_heads, kKeys}, k.data(), "k"),
          g.external(Type::F16, std::vector<int64_t>{kDv, kv_heads, kKeys}, v.data(), "v"),
          g.input_i32(std::span<const int32_t>(pos).subspan(static_cast<size_t>(first), static_cast<size_t>(tokens)),
                      "pos"),
          0.125f);
    };
  }
};

TEST(BatchInvariant, EachTokenAloneEqualsItInABatchOnEveryKernelSet) {
  const Product products[] = {Product(Type::Q4_0), Product(Type::Q8_0), Product(Type::Q4_K), Product(Type::Q6_K),
                              Product(Type::F16)};
  const Experts experts[] = {Experts(Type::Q4_0), Experts(Type::Q4_K), Experts(Type::Q8_0)};
  const Attention attention[] = {Attention(32, 1), Attention(4, 1), Attention(4, 4)};
  latte::testing::for_each_kernel_set([&](const ggl::CpuKernels&) {
    for (const Product& p : products)
      EXPECT_EQ(identical_tokens(p.build(), kTokens, true), kTokens) << "mul_mat " << ggl::type_name(p.type);
    for (const Experts& e : experts)
      EXPECT_EQ(identical_tokens(e.build(), kTokens, true), kTokens) << "mul_mat_id " << ggl::type_name(e.type);
    for (const Attention& a : attention)
      EXPECT_EQ(identical_tokens(a.build(), kTokens, true), kTokens)
          << "flash_attn " << a.heads << " heads on " << a.kv_heads;
  });
}

// The comparisons see a difference: without the flag, the Q4_0 product (rows path alone, panels in
// the batch) and the decode token's attention (keys split across the threads) differ, on the sets
// that have integer GEMMs.
TEST(BatchInvariant, WithoutItTheyDiffer) {
  const Product q4(Type::Q4_0);
  const Attention mqa(32, 1);
  latte::testing::for_each_kernel_set([&](const ggl::CpuKernels& k) {
    if (std::string_view(k.isa) != "generic") {
      EXPECT_LT(identical_tokens(q4.build(), kTokens, false), kTokens) << "mul_mat q4_0";
    }
    EXPECT_LT(identical_tokens(mqa.build(), kTokens, false), kTokens) << "flash_attn 32 heads";
  });
}

}  // namespace test_batch_invariant
