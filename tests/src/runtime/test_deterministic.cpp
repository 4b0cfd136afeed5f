// --deterministic (SessionOptions::deterministic): a sequence's logits are bit-identical whether it
// runs alone (one thread, its whole prompt in one graph, then decode steps) or beside sequences of
// other lengths that start at other steps, its prompt cut into other chunks, on two threads, with
// every kernel set this CPU runs. The fixtures take each kind of product: Q4_0 (16-bit GEMM,
// 8-bit routed experts), the K-quants (16-bit GEMMs of unpacked blocks), Q8_0, MLA's absorbed
// attention and Llama's grouped-query attention (each kernel alone: test_batch_invariant.cpp). Without the option the quantized files are not
// bit-identical (the integer GEMMs choose their path by the number of columns): the last test
// shows that the comparison sees the difference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/cpu/int_gemm.h"
#include "src/runtime/batch_session.h"
#include "src/runtime/session.h"
#include "tests/support/kernel_sets.h"
#include "tests/support/test_support.h"

namespace test_deterministic {

namespace lt = latte::testing;

struct Fixture {
  const char* file;  // under ../shared/fixtures/
  const char* tokens;
};

void PrintTo(const Fixture& f, std::ostream* os) { *os << f.file; }

const Fixture kFixtures[] = {{"ds3-tiny-q4_0.gguf", "ds3-tiny-q4_0.tokens.txt"},
                             {"kquant/kq-tiny-q4_k_m.gguf", "kquant/kq-tiny.tokens.txt"},
                             {"llama-gqa-tiny-q8_0.gguf", "llama-gqa-tiny-q8_0.tokens.txt"}};

constexpr int kSequences = 4;

// Sequence s: tokens [5s, 5s + 20 + 7s); it starts at step s and takes prompt chunks of 1 to 11
// tokens (a decode step when 1), different per sequence and step.
std::vector<std::vector<int32_t>> sequences_of(const std::vector<int32_t>& tokens) {
  std::vector<std::vector<int32_t>> out;
  for (size_t s = 0; s < kSequences; ++s) {
    const size_t begin = 5 * s, end = std::min(tokens.size(), begin + 20 + 7 * s);
    out.emplace_back(tokens.begin() + static_cast<std::ptrdiff_t>(begin),
                     tokens.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return out;
}
size_t chunk_of(size_t s, int step) { return 1 + (s * 7 + static_cast<size_t>(step) * 5) % 11; }

latte::SessionOptions options(bool deterministic, int threads) {
  latte::SessionOptions o;
  o.n_ctx = 96;
  o.n_threads = threads;
  o.deterministic = deterministic;
  return o;
}

// Each sequence's logits [tokens][n_vocab] from the interleaved plan on two threads.
std::vector<std::vector<float>> batched(const latte::Model& model, const std::vector<std::vector<int32_t>>& seqs,
                                        bool deterministic) {
  const auto n_vocab = static_cast<size_t>(model.hparams().n_vocab);
  latte::BatchSession batch(model, kSequences, options(deterministic, 2));
  std::vector<std::vector<float>> out(kSequences);
  std::vector<size_t> fed(kSequences, 0);
  for (int step = 0; step < 100; ++step) {
    std::vector<latte::SequenceTokens> parts;
    for (size_t s = 0; s < kSequences && s <= static_cast<size_t>(step); ++s) {
      if (fed[s] == seqs[s].size()) continue;
      const size_t n = std::min(seqs[s].size() - fed[s], chunk_of(s, step));
      parts.push_back({static_cast<int>(s), std::span<const int32_t>(seqs[s]).subspan(fed[s], n)});
      fed[s] += n;
    }
    if (parts.empty()) break;
    const std::vector<float> logits = batch.step(parts);
    size_t at = 0;
    for (const latte::SequenceTokens& p : parts) {
      const size_t count = p.tokens.size() * n_vocab;
      auto& dst = out[static_cast<size_t>(p.sequence)];
      dst.insert(dst.end(), logits.begin() + static_cast<std::ptrdiff_t>(at),
                 logits.begin() + static_cast<std::ptrdiff_t>(at + count));
      at += count;
    }
  }
  return out;
}

// The sequence alone on one thread: its first 12 tokens in one graph, then a decode step per token.
std::vector<float> alone(const latte::Model& model, const std::vector<int32_t>& seq, bool deterministic) {
  latte::Session session(model, options(deterministic, 1));
  const std::span<const int32_t> all(seq);
  std::vector<float> out = session.eval(all.first(12));
  for (size_t i = 12; i < seq.size(); ++i) {
    const std::vector<float> l = session.eval(all.subspan(i, 1));
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

// How many sequences get bit-identical logits in the batch and alone.
int identical_sequences(const latte::Model& model, const std::vector<std::vector<int32_t>>& seqs, bool deterministic) {
  const std::vector<std::vector<float>> b = batched(model, seqs, deterministic);
  int identical = 0;
  for (size_t s = 0; s < kSequences; ++s) {
    const std::vector<float> a = alone(model, seqs[s], deterministic);
    EXPECT_EQ(a.size(), b[s].size()) << "sequence " << s;
    if (a.size() == b[s].size() && std::memcmp(a.data(), b[s].data(), a.size() * sizeof(float)) == 0) ++identical;
  }
  return identical;
}

latte::Model load(const Fixture& f, std::vector<std::vector<int32_t>>& seqs) {
  const std::string model_rel = std::string("fixtures/") + f.file;
  const std::string tokens_rel = std::string("fixtures/") + f.tokens;
  seqs = sequences_of(lt::read_token_file(lt::shared_dir() / tokens_rel));
  return latte::Model((lt::shared_dir() / model_rel).string());
}

class Deterministic : public ::testing::TestWithParam<Fixture> {};

TEST_P(Deterministic, SequencesAreBitIdenticalAloneAndBatchedOnEveryKernelSet) {
  LATTE_REQUIRE_SHARED(std::string("fixtures/") + GetParam().file);
  std::vector<std::vector<int32_t>> seqs;
  const latte::Model model = load(GetParam(), seqs);
  lt::for_each_kernel_set(
      [&](const ggl::CpuKernels&) { EXPECT_EQ(identical_sequences(model, seqs, true), kSequences); });
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Deterministic, ::testing::ValuesIn(kFixtures));

// The comparison above can fail: without the option the Q4_0 file's sequences differ in the batch
// wherever the CPU has the integer GEMMs.
TEST(Deterministic, WithoutItTheIntegerPathsDiffer) {
  LATTE_REQUIRE_SHARED(std::string("fixtures/") + kFixtures[0].file);
  std::vector<std::vector<int32_t>> seqs;
  const latte::Model model = load(kFixtures[0], seqs);
  if (!ggl::int16_gemm().supports(ggl::Type::Q4_0, model.hparams().n_embd))
    GTEST_SKIP() << "SKIPPED: the kernel set in use has no integer GEMM";
  EXPECT_LT(identical_sequences(model, seqs, false), kSequences);
}

TEST(Deterministic, RefusesTheNaiveMlaFormAndOffload) {
  LATTE_REQUIRE_SHARED(std::string("fixtures/") + kFixtures[0].file);
  std::vector<std::vector<int32_t>> seqs;
  const latte::Model model = load(kFixtures[0], seqs);
  latte::SessionOptions o = options(true, 1);
  o.mla_mode = latte::MlaMode::kNaive;
  EXPECT_THROW(latte::Session(model, o), ggl::Error);
  o = options(true, 1);
  o.placement.emplace().gpu_layers = 99;
  EXPECT_THROW(latte::Session(model, o), ggl::Error);
  o.placement->gpu_layers = 0;
  EXPECT_NO_THROW(latte::Session(model, o));
}

}  // namespace test_deterministic
