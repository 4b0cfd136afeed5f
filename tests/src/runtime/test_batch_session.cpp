// Several sequences in one graph per step (src/runtime/batch_session.h): the fixtures' tokens cut
// into sequences of different lengths that start at different steps and are fed in chunks beside
// each other's decode steps; each sequence's logits must be the ones it gets alone (a Session over
// the same tokens, one step at a time with the same chunks), within the fixture's own F32 bound,
// and the count of bit-identical sequences is printed. Bad steps leave every sequence unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "ggml-like/core/error.h"
#include "src/runtime/batch_session.h"
#include "ggml-like/registry/backend_registry.h"
#include "src/runtime/session.h"
#include "tests/support/logit_metrics.h"
#include "tests/support/simulated_device.h"
#include "tests/support/test_support.h"

namespace test_batch_session {

namespace lt = latte::testing;

// The bounds of ../shared/fixtures/README.md for the fixture's kind: F32 (nrmse 1e-3, max_kl 1e-4,
// every argmax) or quantized (nrmse max(1.25 * oracle nrmse, 0.005), mean_kl max(1.5 * oracle
// mean_kl, 1e-4)). A sequence reading another's cache, or its own at the wrong rows, is far
// outside either (nrmse of order 1).
struct Fixture {
  const char* file;  // under ../shared/fixtures/
  const char* tokens;
  bool f32;
  double nrmse, mean_kl;  // the quantized bounds
};

// MLA with q_lora in F32, MLA with sigmoid-routed experts in Q4_0 (the integer GEMM and the
// grouped expert products; oracle nrmse 0.0753, mean_kl 0.0292), and Llama's grouped-query
// attention over a K/V cache.
const Fixture kFixtures[] = {{"ds2-v2-tiny-f32.gguf", "ds2-v2-tiny-f32.tokens.txt", true, 1e-3, 0},
                             {"ds3-tiny-q4_0.gguf", "ds3-tiny-q4_0.tokens.txt", false, 1.25 * 0.0753, 1.5 * 0.0292},
                             {"llama-gqa-tiny-f32.gguf", "llama-gqa-tiny-f32.tokens.txt", true, 1e-3, 0}};

// Sequence s: fixture tokens [3s, 3s + length) with lengths 14..62, starting at step s: a prompt
// chunk of 1 to 13 tokens a step (a decode step when 1), the chunk sizes different per sequence.
struct Plan {
  std::vector<std::vector<int32_t>> sequences;
  int chunk(int s, int step) const { return 1 + (s * 5 + step * 3) % 13 * ((s + step) % 3 == 0 ? 0 : 1); }
};

Plan make_plan(const std::vector<int32_t>& tokens, int n_sequences) {
  Plan p;
  for (int s = 0; s < n_sequences; ++s) {
    const size_t begin = static_cast<size_t>(3 * s), length = static_cast<size_t>(14 + (s * 11) % 49);
    const size_t end = std::min(tokens.size(), begin + length);
    p.sequences.emplace_back(tokens.begin() + static_cast<std::ptrdiff_t>(begin),
                             tokens.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return p;
}

void PrintTo(const Fixture& f, std::ostream* os) { *os << f.file; }

class BatchedSequences : public ::testing::TestWithParam<Fixture> {};

// Runs the plan in a BatchSession made with `o` (n_ctx 96, an f32 cache) and checks each sequence
// against a Session made with `alone_options` (the same n_ctx and cache) over the same chunks, within the
// fixture's bounds. Calls `inspect` with the batch once it has run; returns whether it offloaded.
bool each_sequence_as_alone(const Fixture& f, latte::SessionOptions o, latte::SessionOptions alone_options,
                            const std::function<void(const latte::BatchSession&)>& inspect = {}) {
  const std::string model_rel = std::string("fixtures/") + f.file;
  const std::string tokens_rel = std::string("fixtures/") + f.tokens;
  const latte::Model model((lt::shared_dir() / model_rel).string());
  const auto n_vocab = static_cast<size_t>(model.hparams().n_vocab);
  constexpr int kSequences = 8;
  const Plan plan = make_plan(lt::read_token_file(lt::shared_dir() / tokens_rel), kSequences);

  o.cache_type = ggl::Type::F32;
  o.n_ctx = 96;
  latte::BatchSession batch(model, kSequences, o);
  std::vector<std::vector<float>> batched(kSequences), alone(kSequences);
  std::vector<std::vector<int>> chunks(kSequences);  // each sequence's chunk sizes, step by step
  std::vector<size_t> fed(kSequences, 0);
  int steps = 0, widest = 0;
  for (int step = 0; step < 200; ++step) {
    std::vector<latte::SequenceTokens> parts;
    for (int s = 0; s < kSequences && s <= step; ++s) {
      const auto& seq = plan.sequences[static_cast<size_t>(s)];
      if (fed[s] == seq.size()) continue;
      const size_t n = std::min(seq.size() - fed[s], static_cast<size_t>(plan.chunk(s, step)));
      parts.push_back({s, std::span<const int32_t>(seq).subspan(fed[s], n)});
      chunks[s].push_back(static_cast<int>(n));
      fed[s] += n;
    }
    if (parts.empty()) {
      if (step >= kSequences) break;
      continue;
    }
    const std::vector<float> logits = batch.step(parts);
    size_t at = 0;
    for (const latte::SequenceTokens& p : parts) {
      const size_t count = p.tokens.size() * n_vocab;
      batched[p.sequence].insert(batched[p.sequence].end(), logits.begin() + static_cast<std::ptrdiff_t>(at),
                                 logits.begin() + static_cast<std::ptrdiff_t>(at + count));
      at += count;
    }
    ++steps;
    widest = std::max(widest, static_cast<int>(parts.size()));
  }
  EXPECT_GE(widest, 6) << "the plan should run most sequences side by side";

  if (inspect) inspect(batch);
  alone_options.cache_type = o.cache_type;
  alone_options.n_ctx = o.n_ctx;
  int identical = 0;
  double worst_nrmse = 0, worst_mean_kl = 0;
  for (int s = 0; s < kSequences; ++s) {
    const auto& seq = plan.sequences[static_cast<size_t>(s)];
    EXPECT_EQ(fed[s], seq.size());
    EXPECT_EQ(batch.n_past(s), static_cast<int64_t>(seq.size()));
    latte::Session session(model, alone_options);
    size_t begin = 0;
    for (int n : chunks[s]) {
      const std::vector<float> l = session.eval(std::span<const int32_t>(seq).subspan(begin, static_cast<size_t>(n)));
      alone[s].insert(alone[s].end(), l.begin(), l.end());
      begin += static_cast<size_t>(n);
    }
    if (batched[s].size() != alone[s].size()) {
      ADD_FAILURE() << "sequence " << s << ": " << batched[s].size() << " logits batched, " << alone[s].size()
                    << " alone";
      continue;
    }
    const lt::LogitMetrics m = lt::compare_logits(alone[s], batched[s], n_vocab);
    EXPECT_LE(m.nrmse, f.nrmse) << "sequence " << s;
    if (f.f32) {
      EXPECT_LE(m.max_kl, 1e-4) << "sequence " << s;
      EXPECT_EQ(m.top1, 1.0) << "sequence " << s;
    } else {
      EXPECT_LE(m.mean_kl, f.mean_kl) << "sequence " << s;
    }
    worst_nrmse = std::max(worst_nrmse, m.nrmse);
    worst_mean_kl = std::max(worst_mean_kl, m.mean_kl);
    identical += std::memcmp(alone[s].data(), batched[s].data(), alone[s].size() * sizeof(float)) == 0;
  }
  // (The integer GEMM takes its rows, panel or float path by how many columns a product has, and
  // those round differently: with the integer kernels the quantized fixture is not bit-identical.)
  std::printf(
      "[batched%s] %s: %d sequences in %d steps (up to %d side by side): %d bit-identical to alone, worst nrmse "
      "%.3g mean_kl %.3g\n",
      batch.offload() ? ", offloaded" : "", f.file, kSequences, steps, widest, identical, worst_nrmse, worst_mean_kl);
  return batch.offload() != nullptr;
}

TEST_P(BatchedSequences, EachSequenceGetsTheLogitsItGetsAlone) {
  LATTE_REQUIRE_SHARED(std::string("fixtures/") + GetParam().file);
  latte::SessionOptions o;
  o.n_threads = 2;
  EXPECT_FALSE(each_sequence_as_alone(GetParam(), o, o));
}

// With every layer placed on a device (a simulated one: the CPU's kernels behind a device's
// interface, which fails a test when handed host memory) the weight products run there from the
// device's copies, while the caches stay in the host's pool: attention over them runs on the CPU
// (a naive MLA prefill's expanded keys and values are the device's own), the Scheduler moving
// activations between the two.
TEST_P(BatchedSequences, OffloadedEachSequenceGetsTheLogitsItGetsAlone) {
  LATTE_REQUIRE_SHARED(std::string("fixtures/") + GetParam().file);
  latte::SessionOptions o;
  o.n_threads = 2;
  const latte::SessionOptions cpu = o;
  o.placement.emplace();
  o.placement->gpu_layers = 99;
  lt::SimulatedDevice* device = nullptr;
  o.devices = [&device] {
    std::vector<std::unique_ptr<ggl::Backend>> list;
    auto d = std::make_unique<lt::SimulatedDevice>();
    device = d.get();
    list.push_back(std::move(d));
    return list;
  };
  // (The batch owns the device: it is looked at before the batch ends.)
  const auto device_ran = [&device](const latte::BatchSession&) {
    ASSERT_NE(device, nullptr);
    EXPECT_GT(device->ran[ggl::Op::kMulMat], 0) << "no weight product ran on the device";
  };
  EXPECT_TRUE(each_sequence_as_alone(GetParam(), o, cpu, device_ran)) << "the batch did not offload";
}

// The same on this machine's GPU where there is one (scripts/gpu-check.sh), against a session
// alone with the same placement: the GPU's kernels round otherwise than the CPU's (its quantized
// products are as far from the exact logits as the CPU's, in another direction), so what batching
// must not change is what the same device gives a sequence alone.
class GpuOffloadBatch : public ::testing::TestWithParam<Fixture> {};

TEST_P(GpuOffloadBatch, EachSequenceGetsTheLogitsItGetsAloneOnTheGpu) {
  const ggl::GpuDevices gpus = ggl::gpu_devices();
  if (gpus.devices.empty()) GTEST_SKIP() << "SKIPPED: " << gpus.why_none;
  LATTE_REQUIRE_SHARED(std::string("fixtures/") + GetParam().file);
  latte::SessionOptions o;
  o.n_threads = 2;
  o.placement.emplace();
  o.placement->gpu_layers = 99;
  EXPECT_TRUE(each_sequence_as_alone(GetParam(), o, o)) << "the batch did not offload";
}

std::string fixture_name(const ::testing::TestParamInfo<Fixture>& info) {
  std::string name = info.param.file;
  name = name.substr(0, name.find(".gguf"));
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BatchedSequences, ::testing::ValuesIn(kFixtures), fixture_name);
INSTANTIATE_TEST_SUITE_P(Fixtures, GpuOffloadBatch, ::testing::ValuesIn(kFixtures), fixture_name);

// kLast gives each listed sequence's last token's logits, the rows kAll gives for those tokens.
TEST(BatchSession, LastLogitsAreEachSequencesLastToken) {
  const std::string model_rel = "fixtures/ds2-v2-tiny-f32.gguf";
  LATTE_REQUIRE_SHARED(model_rel);
  const latte::Model model((lt::shared_dir() / model_rel).string());
  const auto n_vocab = static_cast<size_t>(model.hparams().n_vocab);
  latte::SessionOptions o;
  o.n_ctx = 16;
  o.cache_type = ggl::Type::F32;
  latte::BatchSession all(model, 3, o), last(model, 3, o);
  const std::vector<int32_t> a = {5, 6, 7, 8, 9}, b = {3}, c = {11, 12, 13};
  const std::vector<latte::SequenceTokens> parts = {{2, a}, {0, b}, {1, c}};
  for (int step = 0; step < 2; ++step) {
    const std::vector<float> every = all.step(parts, latte::Logits::kAll);
    const std::vector<float> ends = last.step(parts, latte::Logits::kLast);
    ASSERT_EQ(every.size(), 9 * n_vocab);
    ASSERT_EQ(ends.size(), 3 * n_vocab);
    size_t row = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      row += parts[i].tokens.size();
      EXPECT_EQ(0, std::memcmp(ends.data() + i * n_vocab, every.data() + (row - 1) * n_vocab, n_vocab * sizeof(float)))
          << "step " << step << " part " << i;
    }
  }
}

// A step that cannot run (a sequence that does not exist or is listed twice, a token outside the
// vocabulary, more tokens than the context holds) throws and changes nothing; the sequences then
// go on as if it had not been asked.
TEST(BatchSession, BadStepsLeaveEverySequenceUnchanged) {
  const std::string model_rel = "fixtures/ds2-v2-tiny-f32.gguf";
  LATTE_REQUIRE_SHARED(model_rel);
  const latte::Model model((lt::shared_dir() / model_rel).string());
  latte::SessionOptions o;
  o.n_ctx = 8;
  o.cache_type = ggl::Type::F32;
  latte::BatchSession b(model, 2, o);
  const std::vector<int32_t> two = {1, 2}, bad = {1, static_cast<int32_t>(model.hparams().n_vocab)};
  const std::vector<int32_t> nine(9, 3);
  const auto n_vocab = static_cast<size_t>(model.hparams().n_vocab);
  ASSERT_EQ(b.step(std::vector<latte::SequenceTokens>{{0, two}}).size(), 2 * n_vocab);
  for (const std::vector<latte::SequenceTokens>& parts :
       {std::vector<latte::SequenceTokens>{{2, two}}, std::vector<latte::SequenceTokens>{{1, two}, {1, two}},
        std::vector<latte::SequenceTokens>{{1, two}, {0, bad}}, std::vector<latte::SequenceTokens>{{1, nine}},
        std::vector<latte::SequenceTokens>{{-1, two}}}) {
    EXPECT_THROW(b.step(parts), ggl::Error);
    EXPECT_EQ(b.n_past(0), 2);
    EXPECT_EQ(b.n_past(1), 0);
  }
  EXPECT_THROW(latte::BatchSession(model, 0, o), ggl::Error);
  b.clear(0);
  EXPECT_EQ(b.n_past(0), 0);
  EXPECT_EQ(b.step(std::vector<latte::SequenceTokens>{{0, two}, {1, two}}).size(), 4 * n_vocab);
}

}  // namespace test_batch_session
