// Expert parallelism on the CPU backend (backend/expert_exchange.h): a routed-expert block whose
// products compute only the pairs routed to one rank's range of experts, completed by an
// expert_exchange node. An exchange standing in for the other ranks fills the other rows from the
// whole block's result; every rank's result must then equal the whole block's bit for bit (one
// thread and a team, decode and prefill, three weight types, 1 to 4 ranks), the rows the rank
// computed must already be the whole block's when they are sent (with other work between the send
// and the receipt, or none), and a pager must be asked only for the rank's experts. An exchange
// that fails, at the send or the receipt, stops the graph with its error; a graph with an exchange
// node but no exchange given is an error, not garbage.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ggml-like/backend/expert_exchange.h"
#include "ggml-like/backend/paged_weights.h"
#include "ggml-like/core/error.h"
#include "ggml-like/cpu/cpu_backend.h"
#include "tests/support/routed_experts.h"

namespace test_expert_exchange {

using latte::testing::Experts;
using latte::testing::same_bits;

// The other ranks, played from the whole block's result: at the send the rows inside `computed`
// must already hold it; at the receipt the rows outside are copied from it.
class WholeResultExchange final : public ggl::ExpertExchange {
 public:
  explicit WholeResultExchange(std::vector<float> whole) : whole_(std::move(whole)) {}
  void send(const ggl::Tensor& rows, const ggl::Tensor& ids, const ggl::ExchangeRows& what) override {
    ++sends;
    for_each_row(rows, ids, what.computed, what.n_expert, [&](float* row, const float* want, bool own) {
      own_rows += own;
      own_rows_right += own && std::memcmp(row, want, static_cast<size_t>(rows.ne[0]) * sizeof(float)) == 0;
    });
  }
  void receive(ggl::Tensor& rows, const ggl::Tensor& ids, const ggl::ExchangeRows& what) override {
    ++receipts;
    EXPECT_EQ(receipts, sends) << "received before it was sent";
    for_each_row(rows, ids, what.computed, what.n_expert, [&](float* row, const float* want, bool own) {
      if (!own) std::copy(want, want + rows.ne[0], row);
    });
  }
  std::vector<int64_t> token_counts(int64_t mine) override { return {mine}; }
  void gather(ggl::Tensor&, int64_t, int64_t) override { ADD_FAILURE() << "no tokens to gather"; }
  int sends = 0, receipts = 0;
  int own_rows = 0, own_rows_right = 0;

 private:
  // f(row, the whole block's row, whether the rank computed it), for every (slot, token) row.
  template <typename F>
  void for_each_row(const ggl::Tensor& rows, const ggl::Tensor& ids, ggl::ExpertRange computed, int64_t n_expert, F f) {
    const int64_t D = rows.ne[0], k = ids.ne[0];
    for (int64_t t = 0; t < ids.ne[1]; ++t)
      for (int64_t i = 0; i < k; ++i)
        f(static_cast<float*>(rows.data) + (i + k * t) * D, whole_.data() + (i + k * t) * D,
          computed.holds(ids.i32_row(t)[i], n_expert));
  }
  std::vector<float> whole_;
};

// Rank r of n: experts [r E / n, (r + 1) E / n).
ggl::ExpertRange range_of(int64_t E, int r, int n) {
  return {static_cast<int32_t>(E * r / n), static_cast<int32_t>(E * (r + 1) / n)};
}

TEST(ExpertExchange, RanksTogetherGiveTheWholeResult) {
  for (ggl::Type type : {ggl::Type::Q4_0, ggl::Type::Q4_K, ggl::Type::F32})
    for (int64_t tokens : {1, 40})
      for (int threads : {1, 2}) {
        Experts ex(type, tokens);
        ggl::CpuBackend plain(threads);
        const std::vector<float> whole = ex.run(plain, false);
        ASSERT_TRUE(std::all_of(whole.begin(), whole.end(), [](float v) { return std::isfinite(v); }));
        for (int ranks = 2; ranks <= 4; ++ranks)
          for (int r = 0; r < ranks; ++r)
            for (bool split : {false, true})
              for (bool as_set : {false, true}) {
                // (A set of experts is read the same way whatever the weights' type: one type
                // takes it, which keeps the test's time under qemu.)
                if (as_set && type != ggl::Type::Q4_K) continue;
                SCOPED_TRACE(std::string(ggl::type_name(type)) + ", " + std::to_string(tokens) + " tokens, " +
                             std::to_string(threads) + " threads, rank " + std::to_string(r) + " of " +
                             std::to_string(ranks) + (split ? ", sent first" : "") + (as_set ? ", a set" : ""));
                // A set: every ranks-th expert (an owner table, as --ep-split gives), else a range.
                std::vector<int32_t> owner(static_cast<size_t>(ex.E));
                for (size_t e = 0; e < owner.size(); ++e)
                  owner[e] = static_cast<int32_t>(e % static_cast<size_t>(ranks));
                const ggl::ExpertRange mine =
                    as_set ? ggl::ExpertRange{.owner = owner.data(), .process = r} : range_of(ex.E, r, ranks);
                auto exchange = std::make_shared<WholeResultExchange>(whole);
                ggl::CpuBackend backend(threads);
                backend.use_expert_exchange(exchange);
                EXPECT_TRUE(same_bits(ex.run(backend, false, mine, split), whole));
                EXPECT_EQ(exchange->sends, 1);
                EXPECT_EQ(exchange->receipts, 1);
                EXPECT_EQ(exchange->own_rows_right, exchange->own_rows) << "the rank's own rows, as the whole block's";
              }
      }
}

// The other processes of a data-parallel step, played from the whole block: at the gather the
// other processes' tokens come from x (this process's must already be in place); at the receipt
// the rows of this process's tokens that it did not compute come from the whole block's result,
// and the other tokens' rows are spoilt (no process gets them back).
class GatheringExchange final : public ggl::ExpertExchange {
 public:
  GatheringExchange(const latte::testing::Experts& ex, std::vector<float> whole, int64_t first, int64_t n)
      : ex_(ex), whole_(std::move(whole)), first_(first), n_(n) {}
  void send(const ggl::Tensor&, const ggl::Tensor&, const ggl::ExchangeRows& what) override {
    EXPECT_TRUE(what.gathered);
    ++sends;
  }
  void receive(ggl::Tensor& rows, const ggl::Tensor& ids, const ggl::ExchangeRows& what) override {
    EXPECT_TRUE(what.gathered);
    const int64_t D = rows.ne[0], k = ids.ne[0];
    for (int64_t t = 0; t < ids.ne[1]; ++t)
      for (int64_t i = 0; i < k; ++i) {
        float* row = static_cast<float*>(rows.data) + (i + k * t) * D;
        const bool mine = t >= first_ && t < first_ + n_;
        if (!mine)
          std::fill(row, row + D, NAN);
        else if (!what.computed.holds(ids.i32_row(t)[i], what.n_expert))
          std::copy_n(whole_.data() + (i + k * t) * D, D, row);
      }
  }
  std::vector<int64_t> token_counts(int64_t mine) override { return {first_, mine, ex_.T - first_ - mine}; }
  void gather(ggl::Tensor& all, int64_t first, int64_t n) override {
    ++gathers;
    EXPECT_EQ(first, first_);
    EXPECT_EQ(n, n_);
    const int64_t K = all.ne[0];
    auto* out = static_cast<float*>(all.data);
    own_rows_in_place = std::equal(out + first * K, out + (first + n) * K, ex_.x.data() + first * K);
    for (int64_t t = 0; t < all.ne[1]; ++t)
      if (t < first || t >= first + n) std::copy_n(ex_.x.data() + t * K, K, out + t * K);
  }
  int sends = 0, gathers = 0;
  bool own_rows_in_place = false;

 private:
  const latte::testing::Experts& ex_;
  std::vector<float> whole_;
  int64_t first_, n_;
};

TEST(ExpertExchange, GatheredTokensGiveEveryProcessTheRowsOfItsOwn) {
  for (ggl::Type type : {ggl::Type::Q4_K, ggl::Type::F32})
    for (int threads : {1, 2}) {
      Experts ex(type, 40);
      ggl::CpuBackend plain(threads);
      const std::vector<float> whole = ex.run(plain, false);
      const int64_t row = ex.k_used * ex.K;
      // This process's tokens: some in the middle, the first, the last, one, none.
      for (auto [first, n] : {std::pair<int64_t, int64_t>{12, 9}, {0, 40}, {31, 9}, {5, 1}, {20, 0}})
        for (int r = 0; r < 3; ++r) {
          SCOPED_TRACE(std::string(ggl::type_name(type)) + ", " + std::to_string(threads) + " threads, tokens " +
                       std::to_string(first) + " + " + std::to_string(n) + ", experts of rank " + std::to_string(r) +
                       " of 3");
          auto exchange = std::make_shared<GatheringExchange>(ex, whole, first, n);
          ggl::CpuBackend backend(threads);
          backend.use_expert_exchange(exchange);
          const std::vector<float> mine = ex.run_gathered(backend, range_of(ex.E, r, 3), first, n);
          EXPECT_TRUE(
              same_bits(mine, std::vector<float>(whole.begin() + first * row, whole.begin() + (first + n) * row)));
          EXPECT_EQ(exchange->gathers, 1);
          EXPECT_EQ(exchange->sends, 1);
          EXPECT_EQ(exchange->own_rows_in_place, true);
        }
    }
}

TEST(ExpertExchange, TheGraphChecksWhatItGathers) {
  ggl::Graph g;
  std::vector<float> x(4 * 3);
  ggl::Tensor* mine = g.external(ggl::Type::F32, std::vector<int64_t>{4, 3}, x.data(), "x");
  EXPECT_NO_THROW(g.token_gather(mine, 4, 2, 5));
  EXPECT_NO_THROW(g.token_gather(nullptr, 4, 5, 5));
  EXPECT_THROW(g.token_gather(mine, 4, 3, 5), ggl::Error);  // past the end
  EXPECT_THROW(g.token_gather(mine, 5, 0, 5), ggl::Error);  // another width
  EXPECT_THROW(g.token_gather(mine, 4, -1, 5), ggl::Error);
  EXPECT_THROW(g.token_gather(nullptr, 4, 0, 0), ggl::Error);  // no tokens at all
}

// Gives out the real slices of the experts it is asked for, and records them.
class RecordingPager final : public ggl::PagedWeights {
 public:
  explicit RecordingPager(const Experts& ex) {
    for (const latte::testing::Stack* s : {&ex.gate, &ex.up, &ex.down}) stacks_[s->poison.data()] = s;
  }
  bool pages(const ggl::Tensor& leaf) const override {
    return stacks_.count(static_cast<const uint8_t*>(leaf.data)) > 0;
  }
  void acquire(const ggl::Tensor& leaf, std::span<const int32_t> used, std::span<const uint8_t*> at) override {
    const latte::testing::Stack& s = *stacks_.at(static_cast<const uint8_t*>(leaf.data));
    for (int32_t e : used) {
      asked.push_back(e);
      at[e] = s.real.data() + static_cast<size_t>(e) * s.slice_bytes();
    }
  }
  std::vector<int32_t> asked;

 private:
  std::map<const uint8_t*, const latte::testing::Stack*> stacks_;
};

TEST(ExpertExchange, APagerIsAskedOnlyForTheRanksExperts) {
  const std::vector<int32_t> owner = {0, 1, 0, 1, 1, 0};  // a set: experts 1, 3 and 4 for process 1
  for (int threads : {1, 2})
    for (bool as_set : {false, true}) {
      Experts ex(ggl::Type::Q4_0, 40);
      ggl::CpuBackend plain(threads);
      const std::vector<float> whole = ex.run(plain, false);
      const ggl::ExpertRange own =
          as_set ? ggl::ExpertRange{.owner = owner.data(), .process = 1} : range_of(ex.E, 1, 3);  // experts 2 and 3
      auto pager = std::make_shared<RecordingPager>(ex);
      ggl::CpuBackend backend(threads);
      backend.use_paged_weights(pager);
      backend.use_expert_exchange(std::make_shared<WholeResultExchange>(whole));
      EXPECT_TRUE(same_bits(ex.run(backend, true, own), whole)) << "the pager's slices, not the leaves' NaNs";
      ASSERT_FALSE(pager->asked.empty());
      for (int32_t e : pager->asked) EXPECT_TRUE(own.holds(e, ex.E)) << "expert " << e << " is another rank's";
    }
}

// Fails at the send or at the receipt.
class FailingExchange final : public ggl::ExpertExchange {
 public:
  explicit FailingExchange(bool at_send) : at_send_(at_send) {}
  void send(const ggl::Tensor&, const ggl::Tensor&, const ggl::ExchangeRows&) override {
    if (at_send_) ggl::fail("rank 1 is gone (test)");
  }
  void receive(ggl::Tensor&, const ggl::Tensor&, const ggl::ExchangeRows&) override {
    ggl::fail("rank 1 did not answer (test)");
  }
  std::vector<int64_t> token_counts(int64_t mine) override { return {mine}; }
  void gather(ggl::Tensor&, int64_t, int64_t) override { ggl::fail("rank 1 sent no tokens (test)"); }

 private:
  bool at_send_;
};

TEST(ExpertExchange, AFailingExchangeStopsTheGraphWithItsError) {
  for (int threads : {1, 2})
    for (bool at_send : {false, true})
      for (bool split : {false, true}) {
        SCOPED_TRACE(std::to_string(threads) + " threads" + (at_send ? ", failing at the send" : "") +
                     (split ? ", sent first" : ""));
        Experts ex(ggl::Type::Q4_0, 40);
        ggl::CpuBackend backend(threads);
        backend.use_expert_exchange(std::make_shared<FailingExchange>(at_send));
        try {
          ex.run(backend, false, range_of(ex.E, 0, 2), split);
          ADD_FAILURE() << "the graph ran through a failed exchange";
        } catch (const ggl::Error& e) {
          EXPECT_NE(std::string(e.what()).find(at_send ? "rank 1 is gone" : "rank 1 did not answer"), std::string::npos)
              << e.what();
        }
        ggl::CpuBackend plain(threads);
        EXPECT_TRUE(same_bits(ex.run(backend, false), ex.run(plain, false))) << "the backend computes the next graph";
      }
}

TEST(ExpertExchange, WithoutAnExchangeAGraphThatNeedsOneIsAnError) {
  Experts ex(ggl::Type::F32, 3);
  ggl::CpuBackend backend(1);
  EXPECT_THROW(ex.run(backend, false, range_of(ex.E, 0, 2)), ggl::Error);
  EXPECT_THROW(ex.run(backend, false, range_of(ex.E, 0, 2), true), ggl::Error);
}

TEST(ExpertExchange, TheGraphChecksRangesShapesAndSends) {
  ggl::Graph g;
  std::vector<float> rows(4 * 2 * 3);
  std::vector<int32_t> ids(2 * 3), wrong(3 * 3);
  ggl::Tensor* r = g.external(ggl::Type::F32, std::vector<int64_t>{4, 2, 3}, rows.data(), "rows");
  ggl::Tensor* r2 = g.external(ggl::Type::F32, std::vector<int64_t>{4, 2, 3}, rows.data(), "rows2");
  ggl::Tensor* i = g.external(ggl::Type::I32, std::vector<int64_t>{2, 3}, ids.data(), "ids");
  ggl::Tensor* w = g.external(ggl::Type::I32, std::vector<int64_t>{3, 3}, wrong.data(), "wrong");
  EXPECT_NO_THROW(g.expert_exchange(r, i, {{0, 4}, 8}));
  EXPECT_THROW(g.expert_exchange(r, w, {{0, 4}, 8}), ggl::Error);  // rows [4, 2, 3], ids [3, 3]
  EXPECT_THROW(g.expert_exchange(r, i, {{5, 4}, 8}), ggl::Error);  // not a range
  EXPECT_THROW(g.expert_exchange(r, i, {{0, 4}, 0}), ggl::Error);  // no experts
  EXPECT_THROW(g.expert_send(r, w, {{0, 4}, 8}), ggl::Error);
  ggl::Tensor* sent = g.expert_send(r, i, {{0, 4}, 8});
  EXPECT_NO_THROW(g.expert_exchange(r, i, {{0, 4}, 8}, sent));
  EXPECT_THROW(g.expert_exchange(r, i, {{0, 4}, 8}, i), ggl::Error);      // not a send
  EXPECT_THROW(g.expert_exchange(r2, i, {{0, 4}, 8}, sent), ggl::Error);  // another tensor's send
}

}  // namespace test_expert_exchange
