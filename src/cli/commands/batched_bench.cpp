// `latte batched-bench -m MODEL [-npp 128,...] [-ntg 128,...] [-npl 1,2,4,...] [-c N_KV_MAX] [-b N]
// [-pps] [-t N] [--output-format md|jsonl]`: llama-batched-bench's table (and its jsonl keys) for B
// sequences evaluated together, one graph per step (src/bench/batched_bench.h). -npp, -ntg and
// -npl are llama's spellings of --n-pp, --n-tg and --n-pl (llama_spellings.cpp). `--mixed-load`
// measures the 4-prompts-beside-16-decoders step instead (src/bench/mixed_load.h). Under mpirun,
// `--dp-attention` spreads the sequences over the ranks (data parallelism, docs/scale-out.md).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/cpu/kernel_set.h"
#include "src/bench/batched_bench.h"
#include "src/bench/bench_report.h"
#include "src/bench/bench_runner.h"
#include "src/bench/mixed_load.h"
#include "src/cli/commands/commands.h"
#include "src/cli/default_model.h"
#include "src/cli/flags/flag_checks.h"
#include "src/cli/flags/parse_flags.h"
#include "src/cli/flags/session_flags.h"
#include "src/cli/notes.h"
#include "src/model/expert_pager.h"
#include "src/cli/rank_summary.h"
#include "src/parallel/job.h"

namespace latte::cli {

namespace {

template <class Print>
void print_mixed_load(const bench::MixedLoadResult& r, const bench::BatchedBenchOptions& o, bool jsonl, Print&& print) {
  const int64_t lo = *std::min_element(r.decoder_cached.begin(), r.decoder_cached.end());
  const int64_t hi = *std::max_element(r.decoder_cached.begin(), r.decoder_cached.end());
  if (jsonl) {
    for (const bench::PromptRequest& p : r.prompts)
      print(nlohmann::json{{"request", "prompt"}, {"cached", p.cached}, {"new", p.fresh}, {"ttft", p.ttft}}.dump() +
            "\n");
    print(nlohmann::json{{"request", "decode"},
                         {"sequences", r.decoder_cached.size()},
                         {"cached_min", lo},
                         {"cached_max", hi},
                         {"steps", r.steps},
                         {"t_mixed", r.t_mixed},
                         {"speed_tg_mixed", r.decode_speed_mixed()},
                         {"t_alone", r.t_alone},
                         {"speed_tg_alone", r.decode_speed_alone()}}
              .dump() +
          "\n");
    return;
  }
  print(fmt::format("cpu: {} | {}\n", bench::cpu_model_name(), ggl::describe_cpu_kernels(ggl::cpu_kernels())));
  print(fmt::format("n_batch = {}, cache = {}, n_threads = {}: {} prompts beside {} decoding sequences, {} steps\n\n",
                    o.n_batch, ggl::type_name(o.session.cache_type), o.session.n_threads, r.prompts.size(),
                    r.decoder_cached.size(), r.steps));
  print("| request | cached |  new |  TTFT ms |\n|---------|--------|------|----------|\n");
  for (const bench::PromptRequest& p : r.prompts)
    print(fmt::format("| prompt  | {:6} | {:4} | {:8.1f} |\n", p.cached, p.fresh, 1000 * p.ttft));
  print(fmt::format(
      "\n| decoding | cached    | S_TG t/s beside the prompts | S_TG t/s alone |\n"
      "|----------|-----------|-----------------------------|----------------|\n"
      "| {:8} | {:>9} | {:27.2f} | {:14.2f} |\n",
      r.decoder_cached.size(), fmt::format("{}..{}", lo, hi), r.decode_speed_mixed(), r.decode_speed_alone()));
}

}  // namespace

int cmd_batched_bench(int argc, char** argv) {
  auto print = [](const std::string& s) {  // a row as soon as it is measured
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  };
  CLI::App app{"Measure many sequences decoded together, llama-batched-bench style", argv[0]};
  std::string model_path, output = "md";
  bench::BatchedBenchOptions opts;
  SessionFlags session_flags;
  app.add_option("-m,--model", model_path, "GGUF model (default: the shipped tiny MLA story model)");
  add_integer_list(app, "--n-pp", opts.n_pp, "prompt tokens per sequence, comma-separated", 1)->default_str("128");
  add_integer_list(app, "--n-tg", opts.n_tg, "generated tokens per sequence, comma-separated", 1)->default_str("128");
  add_integer_list(app, "--n-pl", opts.n_pl, "sequences decoded together, comma-separated", 1)->default_str("1");
  app.add_option("--output-format", output, "md (a table) or jsonl (one JSON object per line)")->capture_default_str();
  app.add_flag("--pp-shared", opts.pp_shared,
               "-pps: the sequences share one prompt, read once and copied into each (llama-batched-bench's -pps)");
  bool mixed_load = false;
  app.add_flag("--mixed-load", mixed_load,
               "instead: 4 prompts (64/128/256/256 new tokens after 512/0/0/256 cached) read beside 16 sequences "
               "decoding with 50..400 cached tokens; each prompt's time to first token and the decoding rate");
  bool dp_attention = false;
  app.add_flag("--dp-attention", dp_attention,
               "under mpirun -np N: spread the sequences over the ranks, each with its own caches and attention, "
               "the MoE layers taking every rank's tokens (data parallelism; else every rank runs every sequence)");
  session_flags.add_to(app);
  if (const auto done = parse_flags(app, argc, argv)) return *done;
  if (dp_attention) {
    if (Job::get().alone()) ggl::fail("--dp-attention spreads the sequences over the ranks of mpirun -np N (N > 1)");
    if (mixed_load) ggl::fail("--dp-attention measures -npl sequences: drop --mixed-load");
    opts.rank = Job::get().rank();
    opts.ranks = Job::get().size();
  }
  if (output != "md" && output != "jsonl") ggl::fail("--output-format '{}' is not md or jsonl", output);
  opts.session = session_flags.options();
  opts.n_kv_max = session_flags.n_ctx > 0 ? session_flags.n_ctx : 4096;  // -c: every sequence's rows together
  opts.n_batch = opts.session.n_batch;                                   // -b, or -ub when smaller

  if (model_path.empty()) model_path = default_model_path();
  const Model model(model_path, session_flags.model_options(model_path));
  bench::prefault_weights(model);
  const int threads = opts.session.n_threads;
  if (mixed_load) {
    if (app.count("--n-pp") + app.count("--n-tg") + app.count("--n-pl") > 0)
      ggl::fail("--mixed-load has its own prompts and sequences: drop -npp / -ntg / -npl");
    bench::MixedLoadOptions mixed;
    mixed.n_batch = opts.n_batch;
    mixed.session = opts.session;
    print_mixed_load(bench::run_mixed_load(model, mixed), opts, output == "jsonl", print);
    return 0;
  }
  if (output == "md") {
    print(fmt::format("cpu: {} | {}\n", bench::cpu_model_name(), ggl::describe_cpu_kernels(ggl::cpu_kernels())));
    print(fmt::format("n_kv_max = {}, n_batch = {}, cache = {}, n_threads = {}\n\n", opts.n_kv_max, opts.n_batch,
                      ggl::type_name(opts.session.cache_type), threads));
    print("|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |\n");
    print("|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|\n");
  }
  ExpertPager::Stats pager_seen;  // the expert cache's counts at the last row
  ExchangeStats exchange_seen;    // the expert exchange's (mpirun), likewise
  bench::run_batched_bench(model, opts, [&](const bench::BatchedBenchResult& r) {
    if (output == "md") {
      print(fmt::format("| {:5} | {:6} | {:4} | {:6} | {:8.3f} | {:8.2f} | {:8.3f} | {:8.2f} | {:8.3f} | {:8.2f} |\n",
                        r.pp, r.tg, r.pl, r.n_kv, r.t_pp, r.speed_pp(), r.t_tg, r.speed_tg(), r.t(), r.speed()));
      const int64_t tokens = (opts.pp_shared ? r.pp : r.pp * r.pl) + r.tg * r.pl;
      if (!Job::get().alone()) {  // expert parallelism: what the row's exchange cost
        const ExchangeStats now = Job::get().exchange_stats();
        note(app.get_name(),
             fmt::format("B={}: {}", r.pl, rank_summary(model, now.since(exchange_seen), tokens, r.t())));
        exchange_seen = now;
      } else if (const auto& pager = model.expert_pager()) {  // paged experts: what the row read from the file
        note(app.get_name(), fmt::format("B={}: {}", r.pl, pager->describe(pager_seen, tokens)));
        pager_seen = pager->stats();
      }
    } else {
      const nlohmann::json j = {{"n_kv_max", opts.n_kv_max},
                                {"n_batch", opts.n_batch},
                                {"n_ubatch", opts.n_batch},
                                {"flash_attn", true},
                                {"is_pp_shared", opts.pp_shared},
                                {"n_gpu_layers", 0},
                                {"n_threads", threads},
                                {"n_threads_batch", threads},
                                {"pp", r.pp},
                                {"tg", r.tg},
                                {"pl", r.pl},
                                {"n_kv", r.n_kv},
                                {"t_pp", r.t_pp},
                                {"speed_pp", r.speed_pp()},
                                {"t_tg", r.t_tg},
                                {"speed_tg", r.speed_tg()},
                                {"t", r.t()},
                                {"speed", r.speed()}};
      print(j.dump() + "\n");
    }
  });
  return 0;
}

}  // namespace latte::cli
