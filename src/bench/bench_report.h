// Output of `latte bench`, in llama-bench's two main formats:
//   md    a Markdown table, one row per test as it finishes: model, size, params, backend,
//         threads, with a --mem-budget sweep the budget ("mem"), test, t/s (mean ± sample std
//         over repetitions), and with a roofline a "% roof" column for tg tests
//   json  one array of objects using llama-bench's field names (n_prompt, n_gen, n_depth,
//         n_threads, avg_ts, stddev_ts, model_size, model_n_params, ...)
#pragma once
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/bench/bandwidth_probe.h"
#include "src/bench/bench_runner.h"
#include "src/bench/weight_traffic.h"
#include "src/model/model.h"

namespace latte::bench {

struct ModelSummary {
  std::string filename;     // as given on the command line
  std::string name;         // general.name, else the file's name
  std::string type;         // "deepseek2 Q4_0": architecture and the type holding most weight bytes
  uint64_t size_bytes = 0;  // all tensor data
  int64_t n_params = 0;
};

ModelSummary summarize_model(const Model& model, const std::string& filename);

// The probe and the model's traffic: the decode-speed bound at a given cache depth.
struct Roofline {
  Bandwidth bandwidth;
  DecodeTraffic weights;
  uint64_t cache_bytes_per_position = 0;  // one cached position, all layers

  // Bytes one tg step reads, averaged over a tg test: weights + cache rows of the positions
  // before it (depth + n_gen / 2 on average).
  double bytes_per_token(const BenchTest& t) const;
  double bound_ts(const BenchTest& t) const;  // bandwidth / bytes_per_token
};

// The lines printed above the table: bandwidth, bytes per token and the bound.
std::string roofline_summary(const Roofline& r, int64_t n_expert_used, int64_t n_expert, std::string_view cache_type);

// The warning for a result whose timed runs read pages from disk (BenchResult::major_faults > 0).
std::string disk_reads_warning(const BenchResult& r);

// "8.29 GiB" (MiB below 1 GiB), "15.71 B" (M below 1e9).
std::string format_size(uint64_t bytes);
std::string format_params(int64_t n);

// The note after a row whose model pages its experts: ExpertPager::describe over the timed runs
// and the bytes read per token of them ("" without an expert cache).
std::string expert_cache_note(const BenchResult& r);

class MarkdownTable {
 public:
  // mem_budgets: the --mem-budget items as typed, for a "mem" column; empty: no such column.
  MarkdownTable(const ModelSummary& model, const std::vector<BenchTest>& tests, bool roofline,
                const std::vector<std::string>& mem_budgets = {});
  std::string header() const;  // the column names and the alignment row
  // mem_budget: the item the row's model was loaded under (shown only with the mem column).
  std::string row(const BenchResult& r, const Roofline* roof, const std::string& mem_budget = "") const;

 private:
  std::vector<std::string> cells(const BenchResult& r, const Roofline* roof, const std::string& mem_budget) const;
  std::string line(const std::vector<std::string>& cells) const;

  ModelSummary model_;
  bool roofline_;
  std::vector<size_t> widths_;  // of every column
  std::vector<size_t> shown_;   // the columns printed, in order
};

struct RunInfo {
  std::string cpu_info;
  std::string cache_type;
  int64_t n_batch = 0;
  std::optional<size_t> mem_budget;  // the budget the model was loaded under, in bytes; nullopt: none or no limit known
};

// One llama-bench-style JSON object for a result (roof fields only with a roofline), with latte's
// mem_budget (bytes or null) and expert_cache (null where the model pages no experts: its
// hit_rate, bytes_per_token, read_mb_per_s, wait_seconds, prefetch_accuracy (null where no guess
// was made) and slots over the timed runs).
nlohmann::json result_json(const ModelSummary& model, const RunInfo& run, const BenchResult& r, const Roofline* roof);

// The CPU's model name from /proc/cpuinfo ("" when unknown).
std::string cpu_model_name();

}  // namespace latte::bench
