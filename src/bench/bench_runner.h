// llama-bench-style measurements on a latte Session.
//   pp N @ dD: N prompt tokens evaluated as one batch (split into ubatches of n_batch) on top of D
//              cached tokens; t/s = N / seconds.
//   tg N @ dD: N single-token decode steps (last-position logits only) after D cached tokens;
//              t/s = N / seconds.
// The D cached tokens are filled once per (threads, depth) group, untimed, and every repetition
// starts by truncating the session back to D. One untimed warm-up run precedes the timed ones
// (the whole prompt for pp, one step for tg, as llama-bench does). Token ids are random
// in-vocabulary ids from a fixed seed.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "src/model/model.h"
#include "src/runtime/session.h"
#include "src/placement/placement.h"

namespace latte::bench {

// One -ngl value of the list: its text and the request (nullopt: everything on the CPU).
struct BenchPlacement {
  std::string ngl;
  std::optional<PlacementRequest> request;
};

struct BenchTest {
  int64_t n_prompt = 0;  // exactly one of n_prompt, n_gen is non-zero
  int64_t n_gen = 0;
  int64_t n_depth = 0;
  int threads = 1;
  int placement = 0;  // index into BenchOptions::placements

  bool is_generation() const { return n_gen > 0; }
  int64_t n_tokens() const { return n_prompt + n_gen; }
  std::string name() const;  // "pp512", "tg128", "pp512 @ d4096"
};

// What the model's expert cache (--mem-budget) did during a test's timed runs: the warm-up and
// the depth fill are left out, so that the figures are those of the runs the speed is.
struct ExpertCacheRun {
  ExpertPager::Stats stats;  // counts over the timed runs
  int64_t slots = 0;
  std::string summary;  // ExpertPager::describe over the same runs
};

struct BenchResult {
  BenchTest test;
  std::vector<double> seconds;          // per repetition
  std::string backend = "CPU";          // "sim-gpu+CPU ngl 99" when the session offloads
  double crossing_bytes_per_token = 0;  // activations between the backends, last run's last graph
  // Page faults that read from disk during the timed runs (getrusage's ru_majflt): after the
  // warm-up every weight page should be in memory, so any means the figure includes disk reads
  // (memory pressure, or a reclaim daemon paging out the mapped weights between runs).
  int64_t major_faults = 0;
  std::optional<ExpertCacheRun> expert_cache = std::nullopt;  // nullopt: the model pages no experts

  std::vector<double> samples_ts() const;  // tokens per second per repetition
  // Bytes the expert cache read from the file per token of the timed runs (0 without a cache).
  double expert_bytes_per_token() const;
  double avg_ts() const;
  double stddev_ts() const;  // sample standard deviation (0 for one repetition)
  double avg_seconds() const;
  double stddev_seconds() const;
};

struct BenchOptions {
  std::vector<int64_t> n_prompt{512};
  std::vector<int64_t> n_gen{128};
  std::vector<int64_t> n_depth{0};
  std::vector<int> threads;  // empty: one per physical core
  int repetitions = 5;
  bool warmup = true;
  uint64_t seed = 42;
  SessionOptions session;  // cache type, MLA mode, n_batch (n_ctx and n_threads are set per test)
  // The -ngl list with a GPU; one entry {"", nullopt} (the CPU) when empty.
  std::vector<BenchPlacement> placements;
};

// The tests in llama-bench's order: for each placement (-ngl value), for each thread count, for each depth, the pp tests then
// the tg tests. 0 in the prompt or generation list skips that kind of test. Throws ggl::Error
// for negative sizes, fewer than one repetition or thread, or nothing to run.
std::vector<BenchTest> expand_tests(const BenchOptions& options);

// Runs every test, calling on_result as each finishes; on_status (optional) hears what is
// being done ("filling 4096 tokens", ...).
void run_bench(const Model& model, const BenchOptions& options,
               const std::function<void(const BenchResult&)>& on_result,
               const std::function<void(const std::string&)>& on_status = {});

// Reads one byte per page of every tensor so that the first timed run does not pay for page
// faults of the memory-mapped weights. Returns a checksum of the bytes read (returned so that
// the reads cannot be optimised away).
uint64_t prefault_weights(const Model& model);

}  // namespace latte::bench
