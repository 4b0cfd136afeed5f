// BatchSession over its pool of cache pages (src/model/page_pool.h, src/runtime/prefix_pages.h):
// pages shared between sequences whose tokens start alike, a finished sequence's pages reused
// later and evicted when the pool needs them, copy on write when a sequence truncates into a
// shared page, and a full pool. With SessionOptions::deterministic every reuse must give the
// logits of computing the same tokens from the start, bit for bit: rows read from the wrong page,
// or a shared page written over, would show.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "ggml-like/core/error.h"
#include "src/runtime/batch_session.h"
#include "tests/support/test_support.h"

namespace test_paged_cache {

namespace lt = latte::testing;

constexpr int64_t kPage = 16;  // tokens per page: an f32 cache row of either model is a whole number of them per 4 KiB

struct Fixture {
  const char* file;  // under ../shared/fixtures/
  const char* tokens;
};

void PrintTo(const Fixture& f, std::ostream* os) { *os << f.file; }

// MLA with integer expert products, and Llama's two-stream K/V cache.
const Fixture kFixtures[] = {{"ds3-tiny-q4_0.gguf", "ds3-tiny-q4_0.tokens.txt"},
                             {"llama-gqa-tiny-q8_0.gguf", "llama-gqa-tiny-q8_0.tokens.txt"}};

latte::SessionOptions options(int64_t n_ctx) {
  latte::SessionOptions o;
  o.n_ctx = n_ctx;
  o.n_threads = 2;
  o.deterministic = true;
  o.cache_type = ggl::Type::F32;
  return o;
}

std::vector<int32_t> join(std::span<const int32_t> a, std::span<const int32_t> b) {
  std::vector<int32_t> t(a.begin(), a.end());
  t.insert(t.end(), b.begin(), b.end());
  return t;
}

bool bit_identical(std::span<const float> x, std::span<const float> y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size_bytes()) == 0;
}

class PagedCache : public ::testing::TestWithParam<Fixture> {
 protected:
  void SetUp() override {
    const std::string model_rel = std::string("fixtures/") + GetParam().file;
    const std::string tokens_rel = std::string("fixtures/") + GetParam().tokens;
    LATTE_REQUIRE_SHARED(model_rel);
    LATTE_REQUIRE_SHARED(tokens_rel);
    model_ = std::make_unique<latte::Model>((lt::shared_dir() / model_rel).string());
    tokens_ = lt::read_token_file(lt::shared_dir() / tokens_rel);
    ASSERT_GE(tokens_.size(), 96u);
  }
  std::span<const int32_t> tokens(size_t first, size_t end) const {
    return std::span(tokens_).subspan(first, end - first);
  }
  // The logits of rows [first, tokens.size()) of the tokens evaluated from the start, alone.
  std::vector<float> alone(std::span<const int32_t> t, size_t first) const {
    latte::BatchSession fresh(*model_, 1, options(96), {.page_tokens = kPage});
    const std::vector<float> all = fresh.step(std::vector<latte::SequenceTokens>{{0, t}});
    const auto n_vocab = static_cast<size_t>(model_->hparams().n_vocab);
    return {all.begin() + static_cast<std::ptrdiff_t>(first * n_vocab), all.end()};
  }
  std::vector<float> step(latte::BatchSession& b, int sequence, std::span<const int32_t> t) const {
    return b.step(std::vector<latte::SequenceTokens>{{sequence, t}});
  }

  std::unique_ptr<latte::Model> model_;
  std::vector<int32_t> tokens_;
};

TEST_P(PagedCache, SharedPagesGiveTheLogitsOfRecomputing) {
  latte::BatchSession b(*model_, 3, options(96), {.page_tokens = kPage});
  ASSERT_EQ(b.pool_stats().page_tokens, kPage);
  step(b, 0, tokens(0, 60));  // three whole pages and a part
  // Shares the first 40 tokens with sequence 0: its two whole pages are mapped, not computed.
  const std::vector<int32_t> other = join(tokens(0, 40), tokens(70, 90));
  EXPECT_EQ(b.reuse_prefix(1, other), 2 * kPage);
  EXPECT_EQ(b.pool_stats().pages_reused, 2u);
  EXPECT_EQ(b.pool_stats().pages_used, 4);  // sequence 0's four, two of them sequence 1's too
  const std::vector<float> got = step(b, 1, std::span(other).subspan(2 * kPage));
  EXPECT_TRUE(bit_identical(got, alone(other, 2 * kPage)));
  // Sequence 0 goes on unharmed.
  const std::vector<int32_t> longer = join(tokens(0, 60), tokens(60, 61));
  EXPECT_TRUE(bit_identical(step(b, 0, tokens(60, 61)), alone(longer, 60)));
  // A prefix no page holds reuses nothing.
  EXPECT_EQ(b.reuse_prefix(2, tokens(1, 40)), 0);
}

TEST_P(PagedCache, AFinishedSequencesPagesStayCachedUntilThePoolNeedsThem) {
  latte::BatchSession b(*model_, 2, options(64), {.tokens = 4 * kPage, .page_tokens = kPage});
  step(b, 0, tokens(0, 40));
  b.clear(0);  // its two whole pages stay cached, the part is free
  EXPECT_EQ(b.pool_stats().pages_cached, 2);
  EXPECT_EQ(b.pool_stats().pages_free, 2);
  // The conversation's next turn: the cached pages are mapped again.
  const std::vector<int32_t> next_turn = join(tokens(0, 40), tokens(40, 50));
  EXPECT_EQ(b.reuse_prefix(1, next_turn), 2 * kPage);
  EXPECT_TRUE(bit_identical(step(b, 1, std::span(next_turn).subspan(2 * kPage)), alone(next_turn, 2 * kPage)));
  // Once the pool needs every page for other tokens, they are gone.
  b.clear(1);
  step(b, 0, tokens(30, 30 + 4 * kPage));
  EXPECT_EQ(b.pool_stats().pages_cached, 0);
  b.clear(0);
  EXPECT_EQ(b.reuse_prefix(1, next_turn), 0);
}

TEST_P(PagedCache, TruncatingIntoASharedPageCopiesIt) {
  latte::BatchSession b(*model_, 2, options(96), {.page_tokens = kPage});
  step(b, 0, tokens(0, 3 * kPage));
  EXPECT_EQ(b.reuse_prefix(1, tokens(0, 3 * kPage + 1)), 3 * kPage);  // all three pages shared
  b.truncate(1, 40);  // into the third page: sequence 1 gets its own copy of its first 8 rows
  EXPECT_EQ(b.n_past(1), 40);
  const std::vector<int32_t> other = join(tokens(0, 40), tokens(80, 90));
  EXPECT_TRUE(bit_identical(step(b, 1, tokens(80, 90)), alone(other, 40)));
  // Sequence 0's third page still holds its own rows.
  const std::vector<int32_t> longer = join(tokens(0, 3 * kPage), tokens(60, 61));
  EXPECT_TRUE(bit_identical(step(b, 0, tokens(60, 61)), alone(longer, 3 * kPage)));
}

TEST_P(PagedCache, AFullPoolRefusesAStepAndChangesNothing) {
  latte::BatchSession b(*model_, 2, options(64), {.tokens = 4 * kPage, .page_tokens = kPage});
  step(b, 0, tokens(0, 3 * kPage));
  try {
    step(b, 1, tokens(50, 70));  // two pages; one is left
    FAIL() << "a step past the pool's pages ran";
  } catch (const ggl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cache pool is full"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.n_past(0), 3 * kPage);
  EXPECT_EQ(b.n_past(1), 0);
  EXPECT_EQ(b.reserve(1, 20), kPage);  // what fits
  // An idle sequence marked evictable gives its pages up for the step.
  b.set_evictable(0, true);
  EXPECT_TRUE(bit_identical(step(b, 1, tokens(50, 70)), alone(tokens(50, 70), 0)));
  EXPECT_EQ(b.n_past(0), 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PagedCache, ::testing::ValuesIn(kFixtures),
                         [](const ::testing::TestParamInfo<Fixture>& info) {
                           std::string name = info.param.file;
                           name = name.substr(0, name.find(".gguf"));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace test_paged_cache
