#include "src/bench/batched_bench.h"

#include <algorithm>
#include <random>
#include <span>

#include "ggml-like/core/error.h"
#include "src/runtime/batch_session.h"
#include "src/runtime/stopwatch.h"

namespace latte::bench {
namespace {

void check_list(const char* flag, const std::vector<int64_t>& v, int64_t least) {
  if (v.empty()) ggl::fail("{}: the list is empty", flag);
  for (int64_t x : v)
    if (x < least) ggl::fail("{}: {} is below {}", flag, x, least);
}

// Which of the B sequences this rank evaluates, and under which of its session's ids.
struct Spread {
  int rank = 0, ranks = 1;
  bool mine(size_t s) const { return static_cast<int>(s % static_cast<size_t>(ranks)) == rank; }
  int local(size_t s) const { return static_cast<int>(s / static_cast<size_t>(ranks)); }
  int64_t count(int64_t pl) const { return (pl - rank + ranks - 1) / ranks; }
};

// The prompts, packed into steps of at most n_batch tokens, sequence after sequence (this rank's
// parts of each step).
void prefill(BatchSession& b, const std::vector<std::vector<int32_t>>& prompts, int64_t n_batch, Spread spread) {
  std::vector<size_t> fed(prompts.size(), 0);
  size_t s = 0;
  while (s < prompts.size()) {
    std::vector<SequenceTokens> parts;
    int64_t budget = n_batch;
    for (size_t i = s; i < prompts.size() && budget > 0; ++i) {
      const size_t n = std::min(prompts[i].size() - fed[i], static_cast<size_t>(budget));
      if (spread.mine(i)) parts.push_back({spread.local(i), std::span<const int32_t>(prompts[i]).subspan(fed[i], n)});
      fed[i] += n;
      budget -= static_cast<int64_t>(n);
    }
    b.step(parts, Logits::kLast);
    while (s < prompts.size() && fed[s] == prompts[s].size()) ++s;
  }
}

}  // namespace

void run_batched_bench(const Model& model, const BatchedBenchOptions& o,
                       const std::function<void(const BatchedBenchResult&)>& on_result) {
  check_list("-npp", o.n_pp, 1);
  check_list("-ntg", o.n_tg, 1);
  check_list("-npl", o.n_pl, 1);
  if (o.n_batch <= 0) ggl::fail("-b {} must be positive", o.n_batch);
  const Spread spread{o.rank, o.ranks};
  if (spread.ranks > 1 && o.pp_shared)
    ggl::fail("-pps reads one prompt into one sequence: it does not spread over the ranks of --dp-attention");
  const int64_t n_vocab = model.hparams().n_vocab;
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(n_vocab - 1));
  bool warmed_up = false;
  for (int64_t pp : o.n_pp) {
    for (int64_t tg : o.n_tg) {
      for (int64_t pl : o.n_pl) {
        BatchedBenchResult r{pp, tg, pl, o.pp_shared ? pp + pl * tg : pl * (pp + tg), o.pp_shared};
        if (r.n_kv > o.n_kv_max) continue;
        SessionOptions so = o.session;
        so.n_ctx = pp + tg;
        so.data_parallel = spread.ranks > 1;
        BatchSession b(model, static_cast<int>(std::max<int64_t>(1, spread.count(pl))), so);
        if (!warmed_up) {  // the first graph pays for page faults and thread start-up
          const int32_t t0 = token(rng);
          b.step(std::vector<SequenceTokens>{{0, {&t0, 1}}}, Logits::kLast);
          b.clear(0);
          warmed_up = true;
        }
        std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(o.pp_shared ? 1 : pl), std::vector<int32_t>(pp));
        for (auto& p : prompts) std::generate(p.begin(), p.end(), [&] { return token(rng); });
        const Stopwatch pp_time;
        prefill(b, prompts, o.n_batch, spread);
        if (o.pp_shared)
          for (int s = 1; s < static_cast<int>(pl); ++s) b.copy_prefix(0, s, pp);
        r.t_pp = pp_time.seconds();

        std::vector<int32_t> next(static_cast<size_t>(pl));
        std::vector<SequenceTokens> parts;
        const Stopwatch tg_time;
        for (int64_t i = 0; i < tg; ++i) {
          parts.clear();
          for (size_t s = 0; s < next.size(); ++s) {
            next[s] = token(rng);  // every rank draws every sequence's, and keeps its own
            if (spread.mine(s)) parts.push_back({spread.local(s), {&next[s], 1}});
          }
          b.step(parts, Logits::kLast);
        }
        r.t_tg = tg_time.seconds();
        on_result(r);
      }
    }
  }
}

}  // namespace latte::bench
