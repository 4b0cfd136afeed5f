#include "src/bench/bench_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include <sys/resource.h>

#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/core/error.h"
#include "src/runtime/stopwatch.h"

namespace latte::bench {
namespace {

// The process's page faults so far that had to read from disk.
int64_t major_page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_majflt;
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double sample_stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  const double m = mean(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

std::vector<int32_t> random_tokens(std::mt19937_64& rng, int64_t n_vocab, int64_t n) {
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(n_vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& id : t) id = pick(rng);
  return t;
}

// One timed (or warm-up) run of a test, starting from `depth` cached tokens.
double run_once(Session& s, const BenchTest& t, const std::vector<int32_t>& tokens) {
  s.truncate(t.n_depth);
  const Stopwatch elapsed;
  if (t.is_generation()) {
    for (int32_t id : tokens) s.eval({&id, 1}, Logits::kLast);
  } else {
    s.eval(tokens, Logits::kLast);
  }
  return elapsed.seconds();
}

}  // namespace

std::string BenchTest::name() const {
  std::string n = is_generation() ? fmt::format("tg{}", n_gen) : fmt::format("pp{}", n_prompt);
  if (n_depth > 0) n += fmt::format(" @ d{}", n_depth);
  return n;
}

std::vector<double> BenchResult::samples_ts() const {
  std::vector<double> ts;
  for (double s : seconds) ts.push_back(static_cast<double>(test.n_tokens()) / s);
  return ts;
}
double BenchResult::expert_bytes_per_token() const {
  const double tokens = static_cast<double>(test.n_tokens()) * static_cast<double>(seconds.size());
  return expert_cache && tokens > 0 ? static_cast<double>(expert_cache->stats.bytes_read) / tokens : 0.0;
}
double BenchResult::avg_ts() const { return mean(samples_ts()); }
double BenchResult::stddev_ts() const { return sample_stddev(samples_ts()); }
double BenchResult::avg_seconds() const { return mean(seconds); }
double BenchResult::stddev_seconds() const { return sample_stddev(seconds); }

std::vector<BenchTest> expand_tests(const BenchOptions& o) {
  auto check = [](const std::vector<int64_t>& v, const char* flag) {
    for (int64_t x : v)
      if (x < 0) ggl::fail("{} {} must not be negative", flag, x);
  };
  check(o.n_prompt, "-p");
  check(o.n_gen, "-n");
  check(o.n_depth, "-d");
  if (o.repetitions < 1) ggl::fail("-r {} must be at least 1", o.repetitions);
  std::vector<int> threads = o.threads;
  if (threads.empty()) threads.push_back(ggl::physical_core_count());
  for (int t : threads)
    if (t < 1) ggl::fail("-t {} must be at least 1", t);
  std::vector<int64_t> depths = o.n_depth.empty() ? std::vector<int64_t>{0} : o.n_depth;

  std::vector<BenchTest> tests;
  const int n_placements = std::max<int>(1, static_cast<int>(o.placements.size()));
  for (int pl = 0; pl < n_placements; ++pl)
    for (int t : threads) {
      for (int64_t d : depths) {
        for (int64_t p : o.n_prompt)
          if (p > 0) tests.push_back({p, 0, d, t, pl});
        for (int64_t n : o.n_gen)
          if (n > 0) tests.push_back({0, n, d, t, pl});
      }
    }
  if (tests.empty()) ggl::fail("nothing to run: every -p and -n value is 0");
  return tests;
}

uint64_t prefault_weights(const Model& model) {
  constexpr size_t kPage = 4096;
  uint64_t sum = 0;
  // The weights the runs read from the file's mapping: not those the CPU rewrote at load, whose
  // copies are in memory already and whose file pages were released, nor the paged experts.
  ModelWeights weights = model.weights();
  const ggl::PreparedWeights* copies = model.prepared_weights().get();
  const ExpertPager* pager = model.expert_pager().get();  // paged experts: read into its cache, not mapped
  std::set<WeightRef> seen;
  for_each_weight(weights, [&](WeightRef& t) {
    if (t && seen.insert(t).second && !(copies && copies->copied(t->data)) && !(pager && pager->holds(t->data)))
      for (size_t off = 0; off < t->nbytes; off += kPage) sum += t->data[off];
  });
  return sum;
}

void run_bench(const Model& model, const BenchOptions& options,
               const std::function<void(const BenchResult&)>& on_result,
               const std::function<void(const std::string&)>& on_status) {
  const std::vector<BenchTest> tests = expand_tests(options);
  auto status = [&](const std::string& s) {
    if (on_status) on_status(s);
  };
  const int64_t n_vocab = model.hparams().n_vocab;

  // Tests sharing threads and depth share one session and one fill of the depth.
  for (size_t begin = 0; begin < tests.size();) {
    size_t end = begin;
    int64_t longest = 0;
    while (end < tests.size() && tests[end].threads == tests[begin].threads &&
           tests[end].n_depth == tests[begin].n_depth && tests[end].placement == tests[begin].placement) {
      longest = std::max(longest, tests[end].n_tokens());
      ++end;
    }
    const int64_t depth = tests[begin].n_depth;
    SessionOptions so = options.session;
    so.n_threads = tests[begin].threads;
    so.n_ctx = depth + longest;
    const BenchPlacement* placement =
        options.placements.empty() ? nullptr : &options.placements[tests[begin].placement];
    if (placement) so.placement = placement->request;
    Session session(model, so);
    std::mt19937_64 rng(options.seed);
    if (depth > 0) {
      status(fmt::format("filling the cache with {} tokens ({} threads)", depth, so.n_threads));
      session.eval(random_tokens(rng, n_vocab, depth), Logits::kLast);
    }
    for (size_t i = begin; i < end; ++i) {
      const BenchTest& t = tests[i];
      BenchResult r{t, {}};
      const std::vector<int32_t> tokens = random_tokens(rng, n_vocab, t.n_tokens());
      if (options.warmup) {
        status(fmt::format("{}: warm-up", t.name()));
        // llama-bench's warm-up: the whole prompt for pp, a single step for tg.
        run_once(session, t, t.is_generation() ? std::vector<int32_t>{tokens[0]} : tokens);
      }
      const ExpertPager* pager = model.expert_pager().get();
      const ExpertPager::Stats pager_before = pager ? pager->stats() : ExpertPager::Stats{};
      for (int rep = 0; rep < options.repetitions; ++rep) {
        status(fmt::format("{}: run {}/{}", t.name(), rep + 1, options.repetitions));
        const int64_t faults = major_page_faults();
        r.seconds.push_back(run_once(session, t, tokens));
        r.major_faults += major_page_faults() - faults;
      }
      if (pager)
        r.expert_cache =
            ExpertCacheRun{pager->stats().since(pager_before), pager->slots(), pager->describe(pager_before)};
      if (session.device()) {
        r.backend = fmt::format("{}+CPU ngl {}", session.device()->name(), placement ? placement->ngl : "");
        const OffloadTraffic& traffic = session.last_traffic();
        r.crossing_bytes_per_token = static_cast<double>(traffic.crossing_bytes) / static_cast<double>(traffic.tokens);
      }
      on_result(r);
    }
    begin = end;
  }
}

}  // namespace latte::bench
