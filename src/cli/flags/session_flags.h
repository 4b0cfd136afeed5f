// The engine flags shared by the commands that evaluate a model (eval, run, chat, bench):
// -c/--ctx-size, -t/--threads, -b/--batch-size, --cache-type, --mla-mode, --deterministic, and llama.cpp's flags
// for the same things (-ctk/-ctv, -ub), the GPU placement flags (-ngl, --cpu-moe, --n-cpu-moe,
// --gpu-budget, -ot, --no-op-offload: they take effect when a GPU backend exists and are noted and
// run on the CPU otherwise), --no-repack, --override-kv, things this build does not do (-fa off, --no-mmap, --mlock), which
// are accepted with a one-line note, plus --log-disable.
#pragma once
#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/cli/flags/placement_flags.h"
#include "src/runtime/session.h"

namespace latte::cli {

struct SessionFlags {
  int64_t n_ctx = 0;  // 0: the session's default
  int threads = 0;
  int64_t batch = 512;
  std::string cache_type = "f16";
  std::string mla_mode = "auto";
  bool deterministic = false;
  // llama.cpp's flags.
  std::string gpu_layers;    // -ngl N|auto|all
  PlacementFlags placement;  // --cpu-moe, --n-cpu-moe, --gpu-budget, -ot
  std::string flash_attn;    // -fa on|off|auto
  std::string cache_type_k, cache_type_v;
  int64_t ubatch = 0;  // 0: not given
  bool no_mmap = false, mlock = false, log_disable = false;
  bool no_op_offload = false;            // -nopo
  bool no_repack = false;                // -nr
  std::vector<std::string> override_kv;  // --override-kv KEY=TYPE:VALUE
  std::string mem_budget;                // --mem-budget SIZE|none (default: what Linux allows the process)
  double mpi_timeout = 60;               // --mpi-timeout SECONDS: how long a rank waits for the others
  std::string ep_split = "contiguous";   // --ep-split contiguous|FILE: which rank holds which experts (ep_split.h)
  // bench: -ngl, -fa and --mem-budget take comma-separated lists, as in llama-bench.
  bool lists = false;

  void add_to(CLI::App& app);
  // Validated options for a session; throws ggl::Error naming the flag (as typed) for a bad value.
  // Prints the notes for the llama.cpp flags given that this build does not act on.
  SessionOptions options() const;
  // How to load the model at `path` (--no-repack, --override-kv, and an expert cache where the
  // routed experts do not fit --mem-budget, with a note saying so); throws ggl::Error for a
  // malformed override or budget. Under mpirun (src/parallel/job.h): this rank's share of the
  // experts, after checking that every rank has the same file.
  ModelOptions model_options(const std::string& path) const;
  // The same under one --mem-budget item (bench's sweep) instead of --mem-budget's whole value.
  ModelOptions model_options(const std::string& path, const std::string& budget) const;
  // bench: the --mem-budget items in the order given, each checked (one-line ggl::Error naming the
  // flag and the value otherwise); {""} (the system's default) when the flag is not given.
  std::vector<std::string> mem_budgets() const;
  // Warns once when the context exceeds the model's training context (context_warning.h).
  void warn_beyond_training(const Hparams& hp, int64_t n_ctx) const;
  // The placement request for one -ngl value (an item of bench's list), when a placement flag
  // was given and a GPU exists; nullopt otherwise (everything on the CPU).
  std::optional<PlacementRequest> offload_request(const std::string& ngl) const;
  // bench: one entry per -ngl item ({"", nullopt} without offload).
  std::vector<std::pair<std::string, std::optional<PlacementRequest>>> bench_placements() const;
  // The placement summary line at load, when the session offloads.
  void note_offload(const Session& session) const;
  // The same for a placement in use on `device` (nothing when plan is nullptr).
  void note_offload(const OffloadPlan* plan, const Hparams& hp, const ggl::Backend* device) const;

 private:
  const CLI::App* app_ = nullptr;
  std::string typed(std::string_view name) const;
  ggl::Type resolve_cache_type(bool with_notes = true) const;
  void note_unsupported() const;
  std::optional<size_t> expert_cache_for(const std::string& path, const std::string& budget_value,
                                         bool with_note = true) const;
};

}  // namespace latte::cli
