// BatchSession::truncate and copy_prefix (the server's prompt cache): a sequence that keeps, or is
// given, the cached prefix it shares with a new prompt and then evaluates only the rest must get the
// logits of the whole prompt evaluated from the start. With SessionOptions::deterministic the
// kernels choose nothing by the batch or the chunking, so the logits must be bit-identical. The
// destination of a copy held other tokens first, so stale rows would show.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "ggml-like/core/error.h"
#include "src/runtime/batch_session.h"
#include "tests/support/logit_metrics.h"
#include "tests/support/test_support.h"

namespace test_batch_prefix {

namespace lt = latte::testing;

struct Fixture {
  const char* file;  // under ../shared/fixtures/
  const char* tokens;
};

void PrintTo(const Fixture& f, std::ostream* os) { *os << f.file; }

// MLA in F32, MLA with routed experts in Q4_0, Llama's K/V cache (two streams) in Q8_0.
const Fixture kFixtures[] = {{"ds2-v2-tiny-f32.gguf", "ds2-v2-tiny-f32.tokens.txt"},
                             {"ds3-tiny-q4_0.gguf", "ds3-tiny-q4_0.tokens.txt"},
                             {"llama-gqa-tiny-q8_0.gguf", "llama-gqa-tiny-q8_0.tokens.txt"}};

constexpr size_t kShared = 20;  // the prefix both prompts share

struct Prompts {
  std::vector<int32_t> a, b, other;  // a and b share kShared tokens; other shares none with them
};

Prompts prompts_of(const std::vector<int32_t>& tokens) {
  Prompts p;
  p.a.assign(tokens.begin(), tokens.begin() + 32);
  p.b.assign(tokens.begin(), tokens.begin() + kShared);
  p.b.insert(p.b.end(), tokens.begin() + 40, tokens.begin() + 52);  // a different continuation
  p.other.assign(tokens.begin() + 60, tokens.begin() + 90);
  return p;
}

latte::SessionOptions deterministic_options() {
  latte::SessionOptions o;
  o.n_ctx = 64;
  o.n_threads = 2;
  o.deterministic = true;
  return o;
}

// The logits of rows [first, end) of a kAll step's result.
std::vector<float> rows_from(const std::vector<float>& logits, size_t first, size_t n_vocab) {
  return {logits.begin() + static_cast<std::ptrdiff_t>(first * n_vocab), logits.end()};
}

bool bit_identical(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

class PrefixReuse : public ::testing::TestWithParam<Fixture> {
 protected:
  void SetUp() override {
    model_rel_ = std::string("fixtures/") + GetParam().file;
    tokens_rel_ = std::string("fixtures/") + GetParam().tokens;
  }
  std::string model_rel_, tokens_rel_;
};

TEST_P(PrefixReuse, TruncatedThenContinuedEqualsTheWholePrompt) {
  LATTE_REQUIRE_SHARED(model_rel_);
  LATTE_REQUIRE_SHARED(tokens_rel_);
  const latte::Model model((lt::shared_dir() / model_rel_).string());
  const auto n_vocab = static_cast<size_t>(model.hparams().n_vocab);
  const Prompts p = prompts_of(lt::read_token_file(lt::shared_dir() / tokens_rel_));
  latte::BatchSession batch(model, 2, deterministic_options());

  // Sequence 1: b from the start. Sequence 0: a, then cut back to the shared prefix and given the
  // rest of b (in another chunking, beside a decode step of sequence 1).
  const std::vector<float> whole = batch.step(std::vector<latte::SequenceTokens>{{1, p.b}});
  batch.step(std::vector<latte::SequenceTokens>{{0, p.a}});
  batch.truncate(0, kShared);
  EXPECT_EQ(batch.n_past(0), static_cast<int64_t>(kShared));
  const std::span<const int32_t> rest = std::span(p.b).subspan(kShared);
  const int32_t next = p.a[5];
  const std::vector<float> reused =
      batch.step(std::vector<latte::SequenceTokens>{{0, rest}, {1, {&next, 1}}}, latte::Logits::kAll);
  const std::vector<float> reused_rows(reused.begin(),
                                       reused.begin() + static_cast<std::ptrdiff_t>(rest.size() * n_vocab));
  EXPECT_TRUE(bit_identical(reused_rows, rows_from(whole, kShared, n_vocab)));
  EXPECT_EQ(batch.n_past(0), static_cast<int64_t>(p.b.size()));
}

TEST_P(PrefixReuse, CopiedPrefixThenContinuedEqualsTheWholePrompt) {
  LATTE_REQUIRE_SHARED(model_rel_);
  LATTE_REQUIRE_SHARED(tokens_rel_);
  const latte::Model model((lt::shared_dir() / model_rel_).string());
  const auto n_vocab = static_cast<size_t>(model.hparams().n_vocab);
  const Prompts p = prompts_of(lt::read_token_file(lt::shared_dir() / tokens_rel_));
  latte::BatchSession batch(model, 3, deterministic_options());

  const std::vector<float> whole = batch.step(std::vector<latte::SequenceTokens>{{1, p.b}});
  // Sequence 2 first holds other tokens (rows a missed copy would leave behind), sequence 0 holds a.
  batch.step(std::vector<latte::SequenceTokens>{{2, p.other}, {0, p.a}});
  batch.copy_prefix(0, 2, kShared);
  EXPECT_EQ(batch.n_past(2), static_cast<int64_t>(kShared));
  EXPECT_EQ(batch.n_past(0), static_cast<int64_t>(p.a.size()));  // the source is untouched
  const std::span<const int32_t> rest = std::span(p.b).subspan(kShared);
  const std::vector<float> copied = batch.step(std::vector<latte::SequenceTokens>{{2, rest}});
  EXPECT_TRUE(bit_identical(copied, rows_from(whole, kShared, n_vocab)));

  // The source goes on as if nothing had been copied out of it: its next token's logits equal
  // those of a fresh sequence given a and that token.
  latte::BatchSession fresh(model, 1, deterministic_options());
  std::vector<int32_t> a_next = p.a;
  a_next.push_back(p.b.back());
  const std::vector<float> expected = fresh.step(std::vector<latte::SequenceTokens>{{0, a_next}}, latte::Logits::kLast);
  const std::vector<float> got =
      batch.step(std::vector<latte::SequenceTokens>{{0, {&a_next.back(), 1}}}, latte::Logits::kLast);
  EXPECT_TRUE(bit_identical(got, expected));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PrefixReuse, ::testing::ValuesIn(kFixtures),
                         [](const ::testing::TestParamInfo<Fixture>& info) {
                           std::string name = info.param.file;
                           name = name.substr(0, name.find(".gguf"));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Out-of-range truncations and copies throw and change nothing.
TEST(BatchPrefix, BadTruncationsAndCopiesThrow) {
  const std::string model_rel = "fixtures/ds2-v2-tiny-f32.gguf";
  LATTE_REQUIRE_SHARED(model_rel);
  const latte::Model model((lt::shared_dir() / model_rel).string());
  latte::SessionOptions o;
  o.n_ctx = 8;
  latte::BatchSession b(model, 2, o);
  const std::vector<int32_t> three = {1, 2, 3};
  b.step(std::vector<latte::SequenceTokens>{{0, three}});
  EXPECT_THROW(b.truncate(0, 4), ggl::Error);
  EXPECT_THROW(b.truncate(0, -1), ggl::Error);
  EXPECT_THROW(b.truncate(2, 0), ggl::Error);
  EXPECT_THROW(b.copy_prefix(0, 0, 1), ggl::Error);
  EXPECT_THROW(b.copy_prefix(0, 1, 4), ggl::Error);
  EXPECT_THROW(b.copy_prefix(1, 0, 1), ggl::Error);
  EXPECT_THROW(b.copy_prefix(0, 2, 1), ggl::Error);
  EXPECT_EQ(b.n_past(0), 3);
  EXPECT_EQ(b.n_past(1), 0);
  b.truncate(0, 3);  // to its own length: nothing changes
  b.copy_prefix(0, 1, 0);
  EXPECT_EQ(b.n_past(0), 3);
  EXPECT_EQ(b.n_past(1), 0);
}

}  // namespace test_batch_prefix
