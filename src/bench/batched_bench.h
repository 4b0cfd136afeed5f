// llama-batched-bench's measurement on a latte BatchSession: for each prompt length PP, generation
// length TG and number of parallel sequences B, every sequence gets PP prompt tokens (random
// in-vocabulary ids from a fixed seed), packed into steps of at most n_batch tokens, then TG
// decode steps of one token per sequence, all sequences in one graph per step.
//   S_PP = B * PP / T_PP, S_TG = B * TG / T_TG, N_KV = B * (PP + TG), S = N_KV / (T_PP + T_TG).
// One untimed warm-up step comes first. A test whose N_KV exceeds n_kv_max is skipped, as
// llama-batched-bench does. With pp_shared (-pps) the sequences share one prompt: it is read once,
// into sequence 0, and its rows copied into the others (BatchSession::copy_prefix) within T_PP;
// then, as there, S_PP = PP / T_PP and N_KV = PP + B * TG (llama.cpp's cells; latte's sequences
// hold copies, so the rows in memory are B * (PP + TG)).
// Data-parallel (ranks > 1, `mpirun -np N latte batched-bench --dp-attention`): the B sequences
// are spread over the ranks (sequence s on rank s % N, with its cache and attention), every rank
// steps through the same schedule with its own sequences' tokens, and the MoE layers take every
// rank's; the times are the step loop's, which every rank shares, so the speeds are the job's.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "src/model/model.h"
#include "src/runtime/session.h"

namespace latte::bench {

struct BatchedBenchOptions {
  std::vector<int64_t> n_pp{128};
  std::vector<int64_t> n_tg{128};
  std::vector<int64_t> n_pl{1};
  int64_t n_kv_max = 4096;  // -c: cache rows of all sequences together
  int64_t n_batch = 2048;   // -b: most tokens per prefill step
  bool pp_shared = false;   // -pps
  SessionOptions session;   // cache type, threads, MLA mode
  int rank = 0, ranks = 1;  // data parallelism: this rank of `ranks` (session.data_parallel is set for it)
};

struct BatchedBenchResult {
  int64_t pp = 0, tg = 0, pl = 0, n_kv = 0;
  bool pp_shared = false;
  double t_pp = 0, t_tg = 0;  // seconds
  double speed_pp() const { return t_pp > 0 ? static_cast<double>((pp_shared ? 1 : pl) * pp) / t_pp : 0; }
  double speed_tg() const { return t_tg > 0 ? static_cast<double>(pl * tg) / t_tg : 0; }
  double t() const { return t_pp + t_tg; }
  double speed() const { return t() > 0 ? static_cast<double>(n_kv) / t() : 0; }
};

// Runs every (pp, tg, pl) that fits, in that nesting order, calling `on_result` after each.
// Throws ggl::Error for empty or non-positive lists.
void run_batched_bench(const Model& model, const BatchedBenchOptions& o,
                       const std::function<void(const BatchedBenchResult&)>& on_result);

}  // namespace latte::bench
