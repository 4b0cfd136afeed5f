// Paged expert weights (backend/paged_weights.h) on the CPU backend: a routed-expert block (gate
// and up, independent neighbours, then down) whose weight leaves hold NaNs, with the real expert
// slices elsewhere, given out by a pager. The results must equal, bit for bit, those of the same
// graph on the real weights, on one thread and on a team, for a decode step and a prefill (whose
// experts take the GEMM's panels); the pager must be asked once per node for exactly the experts
// the ids name; a prefetch node hands the pager the distinct ids it names, between the nodes it
// stands between; and a pager that fails stops the computation with its error, leaving the backend
// able to compute the next graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ggml-like/backend/paged_weights.h"
#include "ggml-like/core/error.h"
#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/graph/graph.h"
#include "ggml-like/quant/quant.h"
#include "tests/support/routed_experts.h"

namespace test_paged_weights {

using ggl::Graph;
using ggl::Tensor;
using ggl::Type;
using latte::testing::Experts;
using latte::testing::same_bits;
using latte::testing::Stack;

// Gives out each paged leaf's slices from copies of its own, and records what it was asked for.
class TestPager final : public ggl::PagedWeights {
 public:
  void hold(const Stack& s) {
    std::vector<std::vector<uint8_t>> copies;
    for (int64_t e = 0; e < s.E; ++e)
      copies.emplace_back(s.real.begin() + e * s.slice_bytes(), s.real.begin() + (e + 1) * s.slice_bytes());
    slices_[s.poison.data()] = std::move(copies);
  }
  bool pages(const Tensor& leaf) const override { return slices_.count(static_cast<const uint8_t*>(leaf.data)) > 0; }
  void acquire(const Tensor& leaf, std::span<const int32_t> used, std::span<const uint8_t*> at) override {
    if (calls.empty()) first_leaf = leaf.name;
    if (fail_at_call_ == static_cast<int>(calls.size())) ggl::fail("expert read failed: {} (test)", leaf.name);
    calls.push_back({leaf.name, std::set<int32_t>(used.begin(), used.end())});
    EXPECT_EQ(calls.back().used.size(), used.size()) << "each expert once";
    order.push_back("acquire " + leaf.name);
    auto& copies = slices_.at(static_cast<const uint8_t*>(leaf.data));
    for (int32_t e : used) at[e] = copies[e].data();
  }
  void prefetch(const Tensor& leaf, std::span<const int32_t> likely) override {
    hints.push_back({leaf.name, std::set<int32_t>(likely.begin(), likely.end())});
    EXPECT_EQ(hints.back().used.size(), likely.size()) << "each expert once";
    order.push_back("prefetch " + leaf.name);
  }
  void fail_at_call(int n) { fail_at_call_ = n; }

  struct Call {
    std::string leaf;
    std::set<int32_t> used;
  };
  std::vector<Call> calls, hints;
  std::vector<std::string> order;
  std::string first_leaf;

 private:
  std::map<const uint8_t*, std::vector<std::vector<uint8_t>>> slices_;
  int fail_at_call_ = -1;
};

TEST(PagedWeights, ExpertsAreReadWhereThePagerPutsThem) {
  for (Type type : {Type::Q4_0, Type::Q4_K, Type::F32})
    for (int64_t tokens : {1, 40})
      for (int threads : {1, 2}) {
        SCOPED_TRACE(std::string(ggl::type_name(type)) + ", " + std::to_string(tokens) + " tokens, " +
                     std::to_string(threads) + " threads");
        Experts ex(type, tokens);
        ggl::CpuBackend plain(threads);
        const std::vector<float> want = ex.run(plain, false);
        ASSERT_TRUE(std::all_of(want.begin(), want.end(), [](float v) { return std::isfinite(v); }));

        auto pager = std::make_shared<TestPager>();
        for (const Stack* s : {&ex.gate, &ex.up, &ex.down}) pager->hold(*s);
        ggl::CpuBackend paged(threads);
        paged.use_paged_weights(pager);
        EXPECT_TRUE(same_bits(ex.run(paged, true), want)) << "the pager's slices, not the leaves' NaNs";
        ASSERT_EQ(pager->calls.size(), 3u) << "once per node";
        std::set<std::string> leaves;
        for (const auto& c : pager->calls) {
          EXPECT_EQ(c.used, ex.named()) << c.leaf;
          leaves.insert(c.leaf);
        }
        EXPECT_EQ(leaves, (std::set<std::string>{"gate_exps", "up_exps", "down_exps"}));
        EXPECT_EQ(pager->calls[2].leaf, "down_exps") << "after the two it reads the result of";
      }
}

TEST(PagedWeights, APrefetchNodeHandsItsIdsToThePager) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    Experts ex(Type::Q4_0, 5);
    auto pager = std::make_shared<TestPager>();
    for (const Stack* s : {&ex.gate, &ex.down}) pager->hold(*s);
    ggl::CpuBackend backend(threads);
    backend.use_paged_weights(pager);
    Graph g;
    Tensor* xt = g.external(Type::F32, std::vector<int64_t>{ex.K, 1, ex.T}, ex.x.data(), "x");
    Tensor* it = g.external(Type::I32, std::vector<int64_t>{ex.k_used, ex.T}, ex.ids.data(), "ids");
    const std::vector<int32_t> guess = {4, 1, 4, 0};  // [2, 2]: three distinct
    Tensor* guessed = g.external(Type::I32, std::vector<int64_t>{2, 2}, guess.data(), "guess");
    Tensor* gate = g.mul_mat_id(
        g.external(ex.type, std::vector<int64_t>{ex.K, ex.F, ex.E}, ex.gate.poison.data(), "gate_exps"), xt, it);
    g.prefetch(g.external(ex.type, std::vector<int64_t>{ex.F, ex.K, ex.E}, ex.down.poison.data(), "down_exps"),
               guessed);
    g.prefetch(g.external(ex.type, std::vector<int64_t>{ex.K, ex.F, ex.E}, ex.up.real.data(), "up_exps"),
               guessed);  // not paged
    Tensor* out =
        g.mul_mat_id(g.external(ex.type, std::vector<int64_t>{ex.F, ex.K, ex.E}, ex.down.poison.data(), "down_exps"),
                     g.reshape(gate, {ex.F, ex.k_used, ex.T, 1}), it);
    g.mark_output(out);
    backend.compute(g);
    EXPECT_EQ(pager->order, (std::vector<std::string>{"acquire gate_exps", "prefetch down_exps", "acquire down_exps"}));
    ASSERT_EQ(pager->hints.size(), 1u);
    EXPECT_EQ(pager->hints[0].used, (std::set<int32_t>{0, 1, 4}));
  }
}

TEST(PagedWeights, AFailedReadStopsTheGraphWithItsError) {
  for (int threads : {1, 2})
    for (int fail_at : {0, 2}) {
      SCOPED_TRACE(std::to_string(threads) + " threads, failing call " + std::to_string(fail_at));
      Experts ex(Type::Q4_0, 3);
      auto pager = std::make_shared<TestPager>();
      for (const Stack* s : {&ex.gate, &ex.up, &ex.down}) pager->hold(*s);
      pager->fail_at_call(fail_at);
      ggl::CpuBackend backend(threads);
      backend.use_paged_weights(pager);
      try {
        ex.run(backend, true);
        ADD_FAILURE() << "no error";
      } catch (const ggl::Error& e) {
        // The first node of the graph is gate's or up's (the order the graph was built in).
        const std::string leaf = fail_at == 2 ? "down_exps" : pager->first_leaf;
        EXPECT_EQ(std::string(e.what()), "expert read failed: " + leaf + " (test)");
      }
      // The next graph runs, with the pager reading again.
      pager->fail_at_call(-1);
      ggl::CpuBackend plain(threads);
      EXPECT_TRUE(same_bits(ex.run(backend, true), ex.run(plain, false)));
    }
}

}  // namespace test_paged_weights
