// `latte bench -m MODEL [-p 512] [-n 128] [-d DEPTH,...] [-t THREADS,...] [-r REPS] [-o md|json]
// [--mem-budget SIZE,...] [--roofline] [--profile]`: llama-bench-style prompt-processing and
// generation speeds (see src/bench/bench_runner.h for what each test measures), as a Markdown
// table or a JSON array with llama-bench's field names. A list of memory budgets runs every test
// once per budget, the model loaded under each in turn with its expert cache. --roofline
// measures DRAM read bandwidth and adds the bound it puts on decode speed; --profile adds where
// each step's time went (src/bench/step_profile.h).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/cpu/kernel_set.h"
#include "src/bench/bandwidth_probe.h"
#include "src/bench/bench_report.h"
#include "src/bench/bench_runner.h"
#include "src/bench/step_profile.h"
#include "src/bench/weight_traffic.h"
#include "src/cli/commands/commands.h"
#include "src/cli/context_warning.h"
#include "src/cli/flags/flag_checks.h"
#include "src/cli/notes.h"
#include "src/cli/flags/parse_flags.h"
#include "src/cli/default_model.h"
#include "src/cli/flags/session_flags.h"
#include "src/model/kv_cache.h"
#include "src/placement/memory_budget.h"

namespace latte::cli {
namespace {

void print(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

// The progress line on a terminal's stderr: each status overwrites it, and it is cleared before a
// row is printed.
class StatusLine {
 public:
  StatusLine() : tty_(isatty(STDERR_FILENO)) {}
  void show(const std::string& s) const {
    if (tty_) std::fprintf(stderr, "\r\033[Kbench: %s", s.c_str());
  }
  void clear() const {
    if (tty_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  bool tty_;
};

// What every budget of a --mem-budget sweep shares: the flags' choices.
struct BenchSetup {
  std::string prog;
  std::string model_path;
  bool markdown = true;
  bool roofline = false;
  size_t probe_bytes = 0;
  bench::BenchOptions opts;
  std::vector<bench::BenchTest> tests;
  std::vector<std::string> mem_column;  // the --mem-budget items as typed; empty: not given
};

// The rows of every budget in one table (or one JSON array). The lines above the table (the CPU,
// the roofline, the header) need a model: the first budget's, since the file is the same for all.
class BenchReport {
 public:
  explicit BenchReport(const BenchSetup& setup) : setup_(setup) {}

  // Runs every test on `model`, loaded under the --mem-budget item `budget` (bytes: nullopt for
  // none), printing its rows as they finish.
  void run(const Model& model, const std::string& budget, std::optional<size_t> bytes) {
    if (!table_ && !json_) begin(model);
    bench::prefault_weights(model);
    run_info_.mem_budget = bytes;
    bench::run_bench(
        model, setup_.opts, [&](const bench::BenchResult& r) { add(r, budget); },
        [this](const std::string& s) { status_.show(s); });
  }

  // The JSON array, once every budget has run.
  void end() const {
    if (json_) print(json_->dump(2) + "\n");
  }

 private:
  void begin(const Model& model) {
    summary_ = bench::summarize_model(model, setup_.model_path);
    warn_beyond_training(model);
    const ggl::Type cache_type = setup_.opts.session.cache_type;
    run_info_ = {bench::cpu_model_name(), std::string(ggl::type_name(cache_type)), setup_.opts.session.n_batch, {}};
    if (setup_.roofline) roof_ = measure_roofline(model);
    if (!setup_.markdown) {
      json_ = nlohmann::json::array();
      return;
    }
    print(fmt::format("cpu: {} | {}\n", run_info_.cpu_info, ggl::describe_cpu_kernels(ggl::cpu_kernels())));
    if (roof_) {
      const MoeConfig& moe = model.hparams().moe;
      print(bench::roofline_summary(*roof_, moe.n_expert_used, moe.n_expert, run_info_.cache_type) + "\n");
    }
    table_.emplace(summary_, setup_.tests, roof_.has_value(), setup_.mem_column);
    print(table_->header());
  }

  void add(const bench::BenchResult& r, const std::string& budget) {
    status_.clear();
    const bench::Roofline* roof = roof_ ? &*roof_ : nullptr;
    if (json_) {
      json_->push_back(bench::result_json(summary_, run_info_, r, roof));
      return;
    }
    print(table_->row(r, roof, budget));
    if (r.major_faults > 0) warning(setup_.prog, bench::disk_reads_warning(r));
    if (r.expert_cache) note(setup_.prog, bench::expert_cache_note(r));
    if (r.crossing_bytes_per_token > 0)
      note(setup_.prog, fmt::format("{} on {}: {:.0f} bytes of activations per token cross between the backends",
                                    r.test.name(), r.backend, r.crossing_bytes_per_token));
  }

  void warn_beyond_training(const Model& model) const {
    const auto largest = std::max_element(setup_.tests.begin(), setup_.tests.end(), [](const auto& a, const auto& b) {
      return a.n_depth + a.n_tokens() < b.n_depth + b.n_tokens();
    });
    const int64_t most_tokens = largest->n_depth + largest->n_tokens();
    const std::string beyond = beyond_training_warning(
        model.hparams(), fmt::format("the {} test ({} tokens)", largest->name(), most_tokens), most_tokens);
    if (!beyond.empty()) warning(setup_.prog, beyond);
  }

  // The probe on as many threads as the busiest test, and what the model reads per token.
  bench::Roofline measure_roofline(const Model& model) const {
    int probe_threads = 0;
    for (const bench::BenchTest& t : setup_.tests) probe_threads = std::max(probe_threads, t.threads);
    return bench::Roofline{bench::measure_read_bandwidth(probe_threads, setup_.probe_bytes),
                           bench::decode_weight_traffic(model),
                           cache_bytes_per_token(model.hparams(), setup_.opts.session.cache_type)};
  }

  const BenchSetup& setup_;
  StatusLine status_;
  bench::ModelSummary summary_;
  bench::RunInfo run_info_;
  std::optional<bench::Roofline> roof_;
  std::optional<bench::MarkdownTable> table_;  // -o md
  std::optional<nlohmann::json> json_;         // -o json
};

}  // namespace

int cmd_bench(int argc, char** argv) {
  CLI::App app{"Measure prompt processing (pp) and generation (tg) speed, llama-bench style", argv[0]};
  BenchSetup setup;
  bench::BenchOptions& opts = setup.opts;
  std::string output = "md";
  bool no_warmup = false, profile = false;
  size_t probe_mib = bench::kProbeBytes >> 20;
  SessionFlags session_flags;
  app.add_option("-m,--model", setup.model_path, "GGUF model (default: the shipped tiny MLA story model)");
  add_integer_list(app, "-p,--n-prompt", opts.n_prompt, "prompt sizes, comma-separated (0: no pp tests)", 0)
      ->default_str("512");
  add_integer_list(app, "-n,--n-gen", opts.n_gen, "generation lengths, comma-separated (0: no tg tests)", 0)
      ->default_str("128");
  add_integer_list(app, "-d,--n-depth", opts.n_depth, "cached tokens before each test, comma-separated", 0)
      ->default_str("0");
  session_flags.lists = true;  // -ngl 0,99, -fa 0,1 and --mem-budget 4G,6G as in llama-bench
  session_flags.add_to(app);
  app.get_option("--mem-budget")
      ->description(
          "SIZE[,SIZE...]: memory budgets, comma-separated (none: no budget); every test runs once per budget, "
          "the model loaded under each in turn with its expert cache (default: the memory cgroup's limit or "
          "MemAvailable, less 5%; docs/memory-budget.md)");
  // Replaced by lists; the context is sized per test (depth + tokens).
  app.remove_option(app.get_option("--threads"));
  app.remove_option(app.get_option("--ctx-size"));
  add_integer_list(app, "-t,--threads", opts.threads, "thread counts, comma-separated (default: one per physical core)",
                   1);
  app.add_option("-r,--repetitions", opts.repetitions, "timed runs per test")->capture_default_str()->check(integer(1));
  app.add_option("-o,--output", output, "output format: md (a table) or json (an array)")->capture_default_str();
  app.add_flag("--roofline", setup.roofline,
               "probe DRAM read bandwidth, report the weight bytes each generated token reads and the bound they "
               "imply, and show tg speed as a % of it");
  app.add_option("--roofline-mib", probe_mib, "size of the bandwidth probe's buffer in MiB (far beyond the LLC)")
      ->capture_default_str()
      ->check(integer(1));
  app.add_flag("--no-warmup", no_warmup, "skip the untimed warm-up run before each test");
  app.add_flag("--profile", profile,
               "after the table, where each step's time went (CPU backend, warm-up runs included): per weight "
               "role and type, ms per step, the barrier waits that follow, and the weight bytes read per second");
  if (const auto done = parse_flags(app, argc, argv)) return *done;
  if (output != "md" && output != "json") ggl::fail("-o '{}' is not md or json", output);
  if (profile && output != "md") ggl::fail("--profile prints Markdown tables: use it with -o md");
  opts.session = session_flags.options();
  std::map<int64_t, bench::StepProfile> profiles;  // by tokens per step
  if (profile) {
    ggl::set_cpu_profiling(true);
    opts.session.on_graph_run = [&profiles](const ggl::Graph& g, ggl::Backend& backend) {
      if (const auto* cpu = dynamic_cast<const ggl::CpuBackend*>(&backend))
        profiles[bench::step_tokens(g)].add(g, cpu->last_profile());
    };
  }
  for (auto& [ngl, request] : session_flags.bench_placements()) opts.placements.push_back({ngl, request});
  opts.warmup = !no_warmup;
  setup.tests = bench::expand_tests(opts);  // validates the lists
  // Every item is checked before the first model loads, so a bad one costs no run.
  const std::vector<std::string> budgets = session_flags.mem_budgets();
  if (app.count("--mem-budget") > 0) setup.mem_column = budgets;
  setup.prog = app.get_name();
  setup.markdown = output == "md";
  setup.probe_bytes = probe_mib << 20;
  if (setup.model_path.empty()) setup.model_path = default_model_path();

  BenchReport report(setup);
  for (const std::string& budget : budgets) {
    // One model at a time: this budget's model and its expert cache are freed before the next loads.
    const Model model(setup.model_path, session_flags.model_options(setup.model_path, budget));
    report.run(model, budget, memory_budget(budget, typed_flag(app, "--mem-budget")).bytes);
  }
  report.end();
  if (profile && profiles.empty()) note(app.get_name(), "--profile: no step ran on the CPU backend alone");
  for (const auto& [tokens, p] : profiles)
    print(p.table(tokens == 1 ? "decode steps (1 token)" : fmt::format("steps of {} tokens", tokens)));
  return 0;
}

}  // namespace latte::cli
