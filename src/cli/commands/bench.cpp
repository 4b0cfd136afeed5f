// `latte bench -m MODEL [-p 512] [-n 128] [-d DEPTH,...] [-t THREADS,...] [-r REPS] [-o md|json]
// [--roofline] [--profile]`: llama-bench-style prompt-processing and generation speeds (see
// src/bench/bench_runner.h for what each test measures), as a Markdown table or a JSON array
// with llama-bench's field names. --roofline measures DRAM read bandwidth and adds the bound it
// puts on decode speed; --profile adds where each step's time went (src/bench/step_profile.h).
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

namespace latte::cli {
namespace {

void print(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  CLI::App app{"Measure prompt processing (pp) and generation (tg) speed, llama-bench style", argv[0]};
  std::string model_path, output = "md";
  bench::BenchOptions opts;
  bool roofline = false, no_warmup = false, profile = false;
  size_t probe_mib = bench::kProbeBytes >> 20;
  SessionFlags session_flags;
  app.add_option("-m,--model", model_path, "GGUF model (default: the shipped tiny MLA story model)");
  add_integer_list(app, "-p,--n-prompt", opts.n_prompt, "prompt sizes, comma-separated (0: no pp tests)", 0)
      ->default_str("512");
  add_integer_list(app, "-n,--n-gen", opts.n_gen, "generation lengths, comma-separated (0: no tg tests)", 0)
      ->default_str("128");
  add_integer_list(app, "-d,--n-depth", opts.n_depth, "cached tokens before each test, comma-separated", 0)
      ->default_str("0");
  session_flags.lists = true;  // -ngl 0,99 and -fa 0,1 as in llama-bench
  session_flags.add_to(app);
  // Replaced by lists; the context is sized per test (depth + tokens).
  app.remove_option(app.get_option("--threads"));
  app.remove_option(app.get_option("--ctx-size"));
  add_integer_list(app, "-t,--threads", opts.threads, "thread counts, comma-separated (default: one per physical core)",
                   1);
  app.add_option("-r,--repetitions", opts.repetitions, "timed runs per test")->capture_default_str()->check(integer(1));
  app.add_option("-o,--output", output, "output format: md (a table) or json (an array)")->capture_default_str();
  app.add_flag("--roofline", roofline,
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
  const std::vector<bench::BenchTest> tests = bench::expand_tests(opts);  // validates the lists

  if (model_path.empty()) model_path = default_model_path();
  const Model model(model_path, session_flags.model_options(model_path));
  const bench::ModelSummary summary = bench::summarize_model(model, model_path);
  const auto largest = std::max_element(tests.begin(), tests.end(), [](const auto& a, const auto& b) {
    return a.n_depth + a.n_tokens() < b.n_depth + b.n_tokens();
  });
  const int64_t most_tokens = largest->n_depth + largest->n_tokens();
  const std::string beyond = beyond_training_warning(
      model.hparams(), fmt::format("the {} test ({} tokens)", largest->name(), most_tokens), most_tokens);
  if (!beyond.empty()) warning(app.get_name(), beyond);
  const std::string cache_type(ggl::type_name(opts.session.cache_type));
  std::optional<bench::Roofline> roof;
  if (roofline) {
    int probe_threads = 0;
    for (const bench::BenchTest& t : tests) probe_threads = std::max(probe_threads, t.threads);
    roof = bench::Roofline{bench::measure_read_bandwidth(probe_threads, probe_mib << 20),
                           bench::decode_weight_traffic(model),
                           cache_bytes_per_token(model.hparams(), opts.session.cache_type)};
  }
  bench::prefault_weights(model);

  const bool tty = isatty(STDERR_FILENO);
  auto status = [tty](const std::string& s) {
    if (tty) std::fprintf(stderr, "\r\033[Kbench: %s", s.c_str());
  };
  auto clear_status = [tty] {
    if (tty) std::fprintf(stderr, "\r\033[K");
  };

  if (output == "md") {
    print(fmt::format("cpu: {} | {}\n", bench::cpu_model_name(), ggl::describe_cpu_kernels(ggl::cpu_kernels())));
    if (roof) {
      const MoeConfig& moe = model.hparams().moe;
      print(bench::roofline_summary(*roof, moe.n_expert_used, moe.n_expert, cache_type) + "\n");
    }
    const bench::MarkdownTable table(summary, tests, roof.has_value());
    print(table.header());
    bench::run_bench(
        model, opts,
        [&](const bench::BenchResult& r) {
          clear_status();
          print(table.row(r, roof ? &*roof : nullptr));
          if (r.major_faults > 0) warning(app.get_name(), bench::disk_reads_warning(r));
          if (r.expert_cache) note(app.get_name(), bench::expert_cache_note(r));
          if (r.crossing_bytes_per_token > 0)
            note(app.get_name(),
                 fmt::format("{} on {}: {:.0f} bytes of activations per token cross between the backends",
                             r.test.name(), r.backend, r.crossing_bytes_per_token));
        },
        status);
    if (profile && profiles.empty()) note(app.get_name(), "--profile: no step ran on the CPU backend alone");
    for (const auto& [tokens, p] : profiles)
      print(p.table(tokens == 1 ? "decode steps (1 token)" : fmt::format("steps of {} tokens", tokens)));
  } else {
    const bench::RunInfo run{bench::cpu_model_name(), cache_type, opts.session.n_batch};
    nlohmann::json all = nlohmann::json::array();
    bench::run_bench(
        model, opts,
        [&](const bench::BenchResult& r) {
          clear_status();
          all.push_back(bench::result_json(summary, run, r, roof ? &*roof : nullptr));
        },
        status);
    print(all.dump(2) + "\n");
  }
  return 0;
}

}  // namespace latte::cli
