// `latte perplexity` through the binary on the real trained models of ../shared: its PPL against
// one computed here from the Session's logits (chunked and scored as llama-perplexity does, in
// double precision), the KL divergence base file's layout, KL divergence round trips (a model
// against itself: 0 and full top-token agreement; Q8_0 against F32: the KL computed here from both
// models' logits), and one-line errors for bad input.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "src/runtime/session.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/src/eval/story_text.h"
#include "tests/support/test_support.h"

namespace test_perplexity_cli {

namespace fs = std::filesystem;
using latte::testing::CommandResult;
using latte::testing::run_latte_apart;
using latte::testing::shell_quoted;

constexpr int64_t kCtx = 128;
constexpr int64_t kChunks = 4;
const char* const kStories = "models/stories260K.gguf";
const char* const kMlaF32 = "models/tiny-mla-stories-f32.gguf";
const char* const kMlaQ8 = "models/tiny-mla-stories-q8_0.gguf";

using test_eval_story::shared;
using test_eval_story::slurp;
using test_eval_story::story;
using test_eval_story::story_tokens;

// Every chunk's logits [kChunks][kCtx][n_vocab], each chunk from an empty f32 cache with BOS first.
std::vector<std::vector<float>> chunk_logits(const std::string& model_path) {
  latte::Model model(model_path);
  const auto tok = latte::Tokenizer::from_gguf(model.file());
  latte::Session s(model, {.n_ctx = kCtx, .cache_type = ggl::Type::F32});
  std::vector<std::vector<float>> out;
  for (const std::vector<int32_t>& chunk : test_eval_story::story_chunks(*tok, kCtx, kChunks)) {
    s.clear();
    out.push_back(s.eval(chunk));
  }
  return out;
}

// log softmax of one row, in double.
std::vector<double> log_softmax(const float* row, int64_t n) {
  const double max = *std::max_element(row, row + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(row[i] - max);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = row[i] - max - std::log(sum);
  return out;
}

struct Reference {
  double ppl, error;
};

// PPL over the second half of each chunk, from the Session's logits.
Reference reference_ppl(const std::string& model_path) {
  latte::Model model(model_path);
  const auto tok = latte::Tokenizer::from_gguf(model.file());
  const std::vector<int32_t> ids = story_tokens(*tok);
  const int64_t V = model.hparams().n_vocab;
  const auto logits = chunk_logits(model_path);
  double nll = 0, nll2 = 0;
  int64_t n = 0;
  for (int64_t c = 0; c < kChunks; ++c) {
    for (int64_t i = kCtx / 2; i < kCtx - 1; ++i) {
      const double v = -log_softmax(logits[c].data() + i * V, V)[ids[c * kCtx + i + 1]];
      nll += v, nll2 += v * v, ++n;
    }
  }
  const double mean = nll / n, ppl = std::exp(mean);
  return {ppl, ppl * std::sqrt((nll2 / n - mean * mean) / (n - 1))};
}

double number_after(const std::string& text, const std::string& label) {
  const size_t at = text.find(label);
  if (at == std::string::npos) return NAN;
  return std::stod(text.substr(at + label.size()));
}

class PerplexityCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("latte-ppl-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static CommandResult run(const std::string& args) { return run_latte_apart("perplexity " + args); }
  static std::string story_args(const char* model) {
    return "-m " + shell_quoted(shared(model)) + " -f " + shell_quoted(story()) + " -c " + std::to_string(kCtx) +
           " --chunks " + std::to_string(kChunks) + " --cache-type f32";
  }
  // Writes a base file from model, then compares model_q against it; returns the KL run's stdout.
  std::string kl_run(const char* base_model, const char* model) {
    const CommandResult base = run(story_args(base_model) + " --kl-divergence-base " + shell_quoted(base_file()));
    EXPECT_EQ(base.exit_code, 0) << base.err;
    const CommandResult kl = run("-m " + shell_quoted(shared(model)) + " --kl-divergence-base " +
                                 shell_quoted(base_file()) + " --kl-divergence --cache-type f32");
    EXPECT_EQ(kl.exit_code, 0) << kl.err;
    return kl.out;
  }
  fs::path base_file() const { return dir_ / "base.kld"; }
  // Runs a command that must fail with exit status 1 and one line on stderr naming `expected`.
  void expect_error(const std::string& args, const std::string& expected) {
    const CommandResult r = run(args);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
  }
  fs::path dir_;
};

class PerplexityModels : public PerplexityCli, public ::testing::WithParamInterface<const char*> {};

TEST_P(PerplexityModels, MatchesSessionLogits) {
  LATTE_REQUIRE_SHARED(GetParam());
  const CommandResult r = run(story_args(GetParam()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Reference ref = reference_ppl(shared(GetParam()));
  const double ppl = number_after(r.out, "Final estimate: PPL = ");
  const double err = number_after(r.out, " +/- ");
  EXPECT_NEAR(ppl, ref.ppl, 1e-4 * ref.ppl + 6e-5) << r.out;
  EXPECT_NEAR(err, ref.error, 1e-3 * ref.error + 6e-6) << r.out;
  // One running estimate per chunk, the last one the final PPL.
  const std::regex running(R"(\[(\d+)\]([0-9.]+),)");
  std::vector<double> estimates;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), running); it != std::sregex_iterator(); ++it)
    estimates.push_back(std::stod((*it)[2]));
  ASSERT_EQ(estimates.size(), static_cast<size_t>(kChunks)) << r.out;
  EXPECT_NEAR(estimates.back(), ppl, 1e-4) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Shared, PerplexityModels, ::testing::Values(kStories, kMlaF32),
                         [](const auto& info) { return info.index == 0 ? "stories260K" : "tiny_mla_f32"; });

// The base file in llama-perplexity's layout: header, the text's tokens, one row per scored token.
TEST_F(PerplexityCli, BaseFileLayout) {
  LATTE_REQUIRE_SHARED(kMlaF32);
  ASSERT_EQ(run(story_args(kMlaF32) + " --kl-divergence-base " + shell_quoted(base_file())).exit_code, 0);
  const std::string bytes = slurp(base_file());
  latte::Model model(shared(kMlaF32));
  const std::vector<int32_t> ids = story_tokens(*latte::Tokenizer::from_gguf(model.file()));
  const int64_t V = model.hparams().n_vocab, row = 2 * ((V + 1) / 2) + 4, scored = kCtx - 1 - kCtx / 2;
  ASSERT_EQ(bytes.size(), 8 + 12 + kChunks * kCtx * 4 + kChunks * scored * row * 2);
  EXPECT_EQ(bytes.substr(0, 8), "_logits_");
  int32_t head[3];
  std::memcpy(head, bytes.data() + 8, sizeof head);
  EXPECT_EQ(head[0], kCtx);
  EXPECT_EQ(head[1], V);
  EXPECT_EQ(head[2], kChunks);
  std::vector<int32_t> tokens(static_cast<size_t>(kChunks * kCtx));
  std::memcpy(tokens.data(), bytes.data() + 20, tokens.size() * 4);
  EXPECT_TRUE(std::equal(tokens.begin(), tokens.end(), ids.begin()));
  // The first row decodes to the log-probabilities of the first scored position within a step.
  const auto logits = chunk_logits(shared(kMlaF32));
  const std::vector<double> ref = log_softmax(logits[0].data() + (kCtx / 2) * V, V);
  const char* r0 = bytes.data() + 20 + tokens.size() * 4;
  float scale, min_log_prob;
  std::memcpy(&scale, r0, 4);
  std::memcpy(&min_log_prob, r0 + 4, 4);
  for (int64_t i = 0; i < V; ++i) {
    uint16_t q;
    std::memcpy(&q, r0 + 8 + 2 * i, 2);
    if (ref[i] > min_log_prob + scale) {
      EXPECT_NEAR(scale * q + min_log_prob, ref[i], scale) << i;
    }
  }
}

TEST_F(PerplexityCli, KlOfAModelAgainstItselfIsZero) {
  LATTE_REQUIRE_SHARED(kMlaF32);
  const std::string out = kl_run(kMlaF32, kMlaF32);
  EXPECT_LT(number_after(out, "Mean    KLD: "), 1e-5) << out;
  EXPECT_NEAR(number_after(out, "Same top p: "), 100.0, 1e-9) << out;
  EXPECT_NEAR(number_after(out, "Mean ln(PPL(Q)/PPL(base))     : "), 0.0, 1e-4) << out;
}

// Q8_0 against a base file of the F32 model: the KL divergence, top-token agreement and PPLs
// computed here from both models' full logits.
TEST_F(PerplexityCli, KlOfQ8AgainstF32MatchesTheLogits) {
  LATTE_REQUIRE_SHARED(kMlaQ8);
  LATTE_REQUIRE_SHARED(kMlaF32);
  const std::string out = kl_run(kMlaF32, kMlaQ8);
  const auto base = chunk_logits(shared(kMlaF32)), q = chunk_logits(shared(kMlaQ8));
  latte::Model model(shared(kMlaF32));
  const std::vector<int32_t> ids = story_tokens(*latte::Tokenizer::from_gguf(model.file()));
  const int64_t V = model.hparams().n_vocab;
  double kl = 0, nll = 0, nll_base = 0;
  int64_t same = 0, n = 0;
  for (int64_t c = 0; c < kChunks; ++c) {
    for (int64_t i = kCtx / 2; i < kCtx - 1; ++i) {
      const std::vector<double> lb = log_softmax(base[c].data() + i * V, V), lq = log_softmax(q[c].data() + i * V, V);
      for (int64_t j = 0; j < V; ++j) kl += std::exp(lb[j]) * (lb[j] - lq[j]);
      same +=
          std::max_element(lb.begin(), lb.end()) - lb.begin() == std::max_element(lq.begin(), lq.end()) - lq.begin();
      const int32_t next = ids[c * kCtx + i + 1];
      nll -= lq[next], nll_base -= lb[next], ++n;
    }
  }
  kl /= n;
  EXPECT_GT(kl, 1e-6);  // the two files do differ
  EXPECT_NEAR(number_after(out, "Mean    KLD: "), kl, 0.02 * kl + 2e-6) << out;
  EXPECT_NEAR(number_after(out, "Same top p: "), 100.0 * same / n, 100.0 / n + 1e-9) << out;
  EXPECT_NEAR(number_after(out, "Mean PPL(Q)                   : "), std::exp(nll / n), 1e-4 * std::exp(nll / n));
  EXPECT_NEAR(number_after(out, "Mean PPL(base)                : "), std::exp(nll_base / n),
              1e-3 * std::exp(nll_base / n));
}

TEST_F(PerplexityCli, BadInputIsOneLine) {
  LATTE_REQUIRE_SHARED(kMlaF32);
  const std::string m = "-m " + shell_quoted(shared(kMlaF32));
  expect_error(m, "-f");
  expect_error(m + " -f " + shell_quoted(dir_ / "missing.txt"), "missing.txt");
  std::ofstream(dir_ / "short.txt") << "Once upon a time, there was a cat.";
  expect_error(m + " -f " + shell_quoted(dir_ / "short.txt"), "needs at least 1024");
  expect_error(m + " --kl-divergence", "--kl-divergence-base");
  expect_error(m + " --kl-divergence --kl-divergence-base " + shell_quoted(dir_ / "short.txt"),
               "not a KL divergence base");

  // A base over another vocabulary (a well-formed file of 1000 entries per row).
  {
    std::ofstream f(dir_ / "vocab1000.kld", std::ios::binary);
    const int32_t head[3] = {8, 1000, 1};
    f.write("_logits_", 8);
    f.write(reinterpret_cast<const char*>(head), sizeof head);
    const std::vector<char> rest(8 * 4 + 3 * 1004 * 2, 0);
    f.write(rest.data(), static_cast<std::streamsize>(rest.size()));
  }
  expect_error(m + " --kl-divergence --kl-divergence-base " + shell_quoted(dir_ / "vocab1000.kld"), "over 1000 tokens");

  // A real base file cut short, and one compared with another text than its own.
  ASSERT_EQ(run(story_args(kMlaF32) + " --kl-divergence-base " + shell_quoted(base_file())).exit_code, 0);
  const std::string bytes = slurp(base_file());
  std::ofstream(dir_ / "cut.kld", std::ios::binary) << bytes.substr(0, bytes.size() - 10);
  expect_error(m + " --kl-divergence --kl-divergence-base " + shell_quoted(dir_ / "cut.kld"), "needs");
  std::string other = slurp(story());
  std::reverse(other.begin(), other.end());
  std::ofstream(dir_ / "other.txt") << other;
  expect_error(m + " --kl-divergence --kl-divergence-base " + shell_quoted(base_file()) + " -f " +
                   shell_quoted(dir_ / "other.txt"),
               "another text");
  expect_error(m + " --kl-divergence --kl-divergence-base " + shell_quoted(base_file()) + " -c 64", "-c 128");
}

}  // namespace test_perplexity_cli
