// Expert parallelism across the ranks of an MPI job (src/parallel, docs/scale-out.md), run by CTest
// under `mpirun --oversubscribe -np N` for N = 2, 3 and 4 (tests/CMakeLists.txt), one thread a
// rank. On every deepseek2 fixture each rank loads the model twice: whole, as one process does,
// and with only its rank's share of the routed experts, exchanging the other rows with the other
// ranks. With --deterministic, the shared model's logits must equal the whole model's bit for bit,
// for one sequence (a chunked prompt, then decode steps), for 8 sequences interleaved in one
// batch session, for 8 sequences spread over the ranks (data parallelism), and with a cache too small for the rank's share (read from the file as needed);
// and each rank must hold exactly its share of the experts, measured from the process's page
// table: its cache slots resident for its experts only, and not one whole page of the expert
// tensors in the process's mapping of the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "src/model/model.h"
#include "src/model/resident_memory.h"
#include "src/parallel/job.h"
#include "src/runtime/batch_session.h"
#include "src/runtime/session.h"
#include "tests/support/test_support.h"

namespace mpi_expert_parallel {

namespace fs = std::filesystem;
namespace lt = latte::testing;

// Every deepseek2 file under ../shared/fixtures (the K-quant and i-quant folders included).
std::vector<fs::path> deepseek2_fixtures() {
  std::vector<fs::path> out;
  const fs::path root = lt::shared_dir() / "fixtures";
  for (const char* dir : {"", "kquant", "iquant"})
    for (const auto& entry : fs::directory_iterator(root / dir))
      if (entry.path().extension() == ".gguf" &&
          ggl::GgufFile(entry.path().string()).metadata().get_or<std::string>("general.architecture", "") ==
              "deepseek2")
        out.push_back(entry.path());
  std::sort(out.begin(), out.end());  // the same order on every rank
  return out;
}

latte::Job& job() {
  latte::Job& j = latte::Job::get();
  j.set_timeout(30);
  return j;
}

// cache_bytes: a budget for the rank's expert cache below its share (read from the file as
// needed), else room for the whole share (read at load).
latte::Model shared_model(const fs::path& file, std::optional<size_t> cache_bytes = std::nullopt,
                          latte::ExpertSplit split = {}) {
  latte::ModelOptions o;
  o.expert_share = {
      .rank = job().rank(), .ranks = job().size(), .exchange = job().expert_exchange(), .split = std::move(split)};
  o.expert_cache = cache_bytes;
  return latte::Model(file.string(), o);
}

latte::SessionOptions options(int64_t n_ctx) {
  latte::SessionOptions o;
  o.n_ctx = n_ctx;
  o.n_threads = 1;
  o.deterministic = true;
  return o;
}

std::vector<int32_t> tokens_for(const latte::Model& m, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(m.hparams().n_vocab) - 1);
  std::vector<int32_t> t(n);
  for (int32_t& v : t) v = id(rng);
  return t;
}

// One sequence: its first 13 tokens as a prompt in chunks of 5, then a decode step per token.
std::vector<float> one_sequence(const latte::Model& model, const std::vector<int32_t>& tokens) {
  latte::SessionOptions o = options(64);
  o.n_batch = 5;
  latte::Session session(model, o);
  const std::span<const int32_t> all(tokens);
  std::vector<float> out = session.eval(all.first(13));
  for (size_t i = 13; i < tokens.size(); ++i) {
    const std::vector<float> l = session.eval(all.subspan(i, 1));
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

// 8 sequences of different lengths, each starting at its own step and fed in chunks of 1 to 6
// tokens, in one batch session: every step's logits in order. With `mine`, only the logits of the
// sequences s with mine(s); data-parallel, the session evaluates only those (the others are other
// ranks'), stepping with the others at every step, also those without a token of its own.
using Keep = std::function<bool(size_t)>;
std::vector<float> eight_sequences(
    const latte::Model& model, const std::vector<int32_t>& tokens, const Keep& mine = [](size_t) { return true; },
    bool data_parallel = false) {
  constexpr int kSequences = 8;
  latte::SessionOptions o = options(48);
  o.data_parallel = data_parallel;
  latte::BatchSession batch(model, kSequences, o);
  const auto n_vocab = static_cast<size_t>(model.hparams().n_vocab);
  std::vector<size_t> fed(kSequences, 0), length(kSequences);
  for (size_t s = 0; s < kSequences; ++s) length[s] = 6 + 3 * s;
  std::vector<float> out;
  for (int step = 0;; ++step) {
    std::vector<latte::SequenceTokens> parts;
    std::vector<bool> kept;  // per token of the step's parts
    bool any = false;        // of any rank
    for (size_t s = 0; s < kSequences && s <= static_cast<size_t>(step); ++s) {
      if (fed[s] == length[s]) continue;
      const size_t n = std::min(length[s] - fed[s], 1 + (s * 5 + static_cast<size_t>(step) * 3) % 6);
      any = true;
      if (!data_parallel || mine(s)) {
        parts.push_back({static_cast<int>(s), std::span<const int32_t>(tokens).subspan(4 * s + fed[s], n)});
        kept.insert(kept.end(), n, mine(s));
      }
      fed[s] += n;
    }
    if (!any) break;
    const std::vector<float> logits = batch.step(parts);
    for (size_t t = 0; t < kept.size(); ++t)
      if (kept[t]) out.insert(out.end(), logits.begin() + t * n_vocab, logits.begin() + (t + 1) * n_vocab);
  }
  return out;
}

bool identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

TEST(ExpertParallel, RunsOnSeveralRanks) { EXPECT_GT(job().size(), 1) << "run this test under mpirun -np N (N > 1)"; }

TEST(ExpertParallel, OneSequenceIsBitIdenticalToOneProcess) {
  const std::vector<fs::path> files = deepseek2_fixtures();
  ASSERT_GE(files.size(), 20u);
  for (const fs::path& file : files) {
    const latte::Model whole(file.string());
    const latte::Model shared = shared_model(file);
    const std::vector<int32_t> tokens = tokens_for(whole, 24, 29);
    EXPECT_TRUE(identical(one_sequence(whole, tokens), one_sequence(shared, tokens)))
        << file.filename() << " on rank " << job().rank() << " of " << job().size();
  }
}

TEST(ExpertParallel, EightInterleavedSequencesAreBitIdenticalToOneProcess) {
  for (const fs::path& file : deepseek2_fixtures()) {
    const latte::Model whole(file.string());
    const latte::Model shared = shared_model(file);
    const std::vector<int32_t> tokens = tokens_for(whole, 64, 8);
    EXPECT_TRUE(identical(eight_sequences(whole, tokens), eight_sequences(shared, tokens)))
        << file.filename() << " on rank " << job().rank() << " of " << job().size();
  }
}

// Data parallelism: each rank evaluates its own sequences (s % N == rank) with their caches and
// attention, and the MoE layers take the tokens of every rank. A rank's logits must equal the
// whole model's for its sequences, bit for bit, also at the steps where some rank has no tokens
// (at the first steps only sequence 0 has any).
TEST(ExpertParallel, EightSequencesSpreadOverTheRanksAreBitIdenticalToOneProcess) {
  const auto mine = [](size_t s) { return static_cast<int>(s) % job().size() == job().rank(); };
  for (const fs::path& file : deepseek2_fixtures()) {
    const latte::Model whole(file.string());
    const latte::Model shared = shared_model(file);
    const std::vector<int32_t> tokens = tokens_for(whole, 64, 8);
    const std::vector<float> want = eight_sequences(whole, tokens, mine);
    ASSERT_FALSE(want.empty());
    EXPECT_TRUE(identical(want, eight_sequences(shared, tokens, mine, true)))
        << file.filename() << " on rank " << job().rank() << " of " << job().size();
  }
}

// Routing counts far from even (some experts used much more than others), per layer.
std::vector<std::vector<double>> skewed_counts(const latte::Model& m) {
  std::vector<std::vector<double>> counts;
  for (size_t l = 0; l < m.weights().layers.size(); ++l) {
    std::vector<double>& c = counts.emplace_back();
    if (!m.weights().layers[l].is_moe()) continue;
    for (int64_t e = 0; e < m.hparams().moe.n_expert; ++e)
      c.push_back(static_cast<double>(((e * 37 + static_cast<int64_t>(l) * 11) % 29) *
                                      ((e * 37 + static_cast<int64_t>(l) * 11) % 29)));
  }
  return counts;
}

// --ep-split by routing counts: each rank holds a set of experts (not a range) in every layer, as
// many as its range would hold; the logits stay bit-identical, replicated and data-parallel, and
// each rank holds exactly its set.
TEST(ExpertParallel, ASplitByRoutingCountsGivesTheSameLogits) {
  const auto mine = [](size_t s) { return static_cast<int>(s) % job().size() == job().rank(); };
  int sets = 0;  // layers whose rank's experts are not its range
  for (const fs::path& file : deepseek2_fixtures()) {
    const latte::Model whole(file.string());
    if (whole.hparams().moe.n_expert < job().size()) continue;
    const latte::ExpertSplit split = latte::ExpertSplit::balanced(skewed_counts(whole), job().size());
    const latte::Model shared = shared_model(file, std::nullopt, split);
    const int64_t E = whole.hparams().moe.n_expert;
    int64_t held = 0;
    for (size_t l = 0; l < whole.weights().layers.size(); ++l) {
      if (!whole.weights().layers[l].is_moe()) continue;
      const ggl::ExpertRange own = shared.own_experts(static_cast<int64_t>(l));
      const ggl::ExpertRange range = latte::rank_experts(E, job().rank(), job().size());
      int64_t n = 0;
      bool range_only = true;
      for (int64_t e = 0; e < E; ++e) {
        n += own.holds(e, E);
        range_only = range_only && own.holds(e, E) == range.holds(e, E);
      }
      EXPECT_EQ(n, range.end - range.first) << file.filename() << " layer " << l;
      sets += !range_only;
      held += n;
    }
    EXPECT_EQ(static_cast<int64_t>(shared.expert_pager()->resident_bytes() / shared.expert_pager()->slot_bytes()), held)
        << file.filename();
    const std::vector<int32_t> tokens = tokens_for(whole, 64, 8);
    EXPECT_TRUE(identical(one_sequence(whole, tokens), one_sequence(shared, tokens)))
        << file.filename() << " on rank " << job().rank() << " of " << job().size();
    EXPECT_TRUE(identical(eight_sequences(whole, tokens, mine), eight_sequences(shared, tokens, mine, true)))
        << file.filename() << " data-parallel on rank " << job().rank() << " of " << job().size();
  }
  EXPECT_GT(sets, 0) << "the split by counts was contiguous everywhere";
}

// The resident bytes of the whole pages within [data, data + bytes) (the pages at the ends may
// hold a neighbouring tensor's bytes too).
size_t resident_whole_pages(const void* data, size_t bytes) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data), end = begin + bytes;
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  return first < last ? latte::resident_in_memory(reinterpret_cast<const void*>(first), last - first) : 0;
}

// A rank whose budget holds a few of its experts reads the others from the file as they are
// needed (and only its own: the cache refuses another rank's), with the same logits.
TEST(ExpertParallel, AShareReadFromTheFileAsNeededGivesTheSameLogits) {
  int64_t misses = 0;
  for (const fs::path& file : deepseek2_fixtures()) {
    const latte::Model whole(file.string());
    const latte::Model probe = shared_model(file, size_t{1});  // no slot: its size, and the share
    int64_t moe_layers = 0, fewest = INT64_MAX;  // the fewest experts a rank holds (every rank skips alike)
    for (const latte::LayerWeights& l : probe.weights().layers) moe_layers += l.is_moe();
    for (int r = 0; r < job().size(); ++r) {
      const ggl::ExpertRange range = latte::rank_experts(probe.hparams().moe.n_expert, r, job().size());
      fewest = std::min<int64_t>(fewest, (range.end - range.first) * moe_layers);
    }
    if (fewest < 2) continue;  // (3 or 4 ranks of a file with few experts)
    const ggl::ExpertRange range = latte::rank_experts(probe.hparams().moe.n_expert, job().rank(), job().size());
    const int64_t owned = (range.end - range.first) * moe_layers;
    const latte::Model shared = shared_model(file, static_cast<size_t>(owned / 2) * probe.expert_pager()->slot_bytes());
    ASSERT_EQ(shared.expert_pager()->slots(), owned / 2) << file.filename();
    EXPECT_FALSE(shared.expert_pager()->preloaded()) << file.filename();
    const std::vector<int32_t> tokens = tokens_for(whole, 24, 5);
    EXPECT_TRUE(identical(one_sequence(whole, tokens), one_sequence(shared, tokens)))
        << file.filename() << " on rank " << job().rank() << " of " << job().size();
    misses += shared.expert_pager()->stats().misses;
  }
  EXPECT_GT(misses, 0) << "experts read as they were needed";
}

// What the process holds of the routed experts: its cache slots' resident pages, counted in
// experts (every slot has the same size), and the pages of the file's mapping of the expert
// tensors that the process touched.
TEST(ExpertParallel, EachRankHoldsItsShareOfTheExperts) {
  for (const fs::path& file : deepseek2_fixtures()) {
    const latte::Model shared = shared_model(file);
    const std::vector<int32_t> tokens = tokens_for(shared, 24, 3);
    one_sequence(shared, tokens);
    const latte::ExpertPager& pager = *shared.expert_pager();
    const int64_t E = shared.hparams().moe.n_expert;
    int64_t moe_layers = 0;
    size_t mapped_expert_pages = 0, expert_bytes = 0;
    for (const latte::LayerWeights& l : shared.weights().layers) {
      if (!l.is_moe()) continue;
      ++moe_layers;
      for (latte::WeightRef w : {l.ffn_gate_exps, l.ffn_up_exps, l.ffn_down_exps}) {
        mapped_expert_pages += resident_whole_pages(w->data, w->nbytes);
        expert_bytes += w->nbytes;
      }
    }
    const double held = static_cast<double>(pager.resident_bytes()) / static_cast<double>(pager.slot_bytes());
    const double share = static_cast<double>(E * moe_layers) / job().size();
    const ggl::ExpertRange own = latte::rank_experts(E, job().rank(), job().size());
    EXPECT_TRUE(pager.preloaded()) << file.filename();
    EXPECT_EQ(held, static_cast<double>((own.end - own.first) * moe_layers)) << file.filename();
    EXPECT_LE(std::abs(held - share), static_cast<double>(moe_layers)) << file.filename() << ": one expert a layer";
    EXPECT_EQ(mapped_expert_pages, 0u) << file.filename() << ": pages of experts mapped from the file";
    // Every slot holds one expert's three slices, padded to whole pages.
    EXPECT_LE(static_cast<double>(pager.slot_bytes()),
              static_cast<double>(expert_bytes) / static_cast<double>(E * moe_layers) + 6 * 4096.0)
        << file.filename();
  }
}

}  // namespace mpi_expert_parallel
