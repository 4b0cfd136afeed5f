// The engine flags shared by the commands that evaluate a model (eval, run, chat, bench):
// -c/--ctx-size, -t/--threads, -b/--batch-size, --cache-type, --mla-mode, and llama.cpp's flags
// for the same things (-ctk/-ctv, -ub) or for things this build does not do (-ngl, -fa off,
// --no-mmap, --mlock), which are accepted with a one-line note, plus --log-disable.
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "src/cli/placement_flags.h"
#include "src/model/session.h"

namespace latte::cli {

struct SessionFlags {
  int64_t n_ctx = 0;  // 0: the session's default
  int threads = 0;
  int64_t batch = 512;
  std::string cache_type = "f16";
  std::string mla_mode = "auto";
  // llama.cpp's flags.
  std::string gpu_layers;  // -ngl N|auto|all
  PlacementFlags placement;  // --cpu-moe, --n-cpu-moe, --gpu-budget, -ot
  std::string flash_attn;  // -fa on|off|auto
  std::string cache_type_k, cache_type_v;
  int64_t ubatch = 0;  // 0: not given
  bool no_mmap = false, mlock = false, log_disable = false;
  // bench: -ngl and -fa take comma-separated lists, as in llama-bench.
  bool lists = false;

  void add_to(CLI::App& app);
  // Validated options for a session; throws ggl::Error naming the flag (as typed) for a bad value.
  // Prints the notes for the llama.cpp flags given that this build does not act on.
  SessionOptions options() const;
  // Warns once when the context exceeds the model's training context (context_warning.h).
  void warn_beyond_training(const Hparams& hp, int64_t n_ctx) const;

 private:
  const CLI::App* app_ = nullptr;
  std::string typed(std::string_view name) const;
  ggl::Type resolve_cache_type() const;
  void note_unsupported() const;
};

}  // namespace latte::cli
