// The engine flags shared by the commands that evaluate a model (eval, run, chat, bench):
// -c/--ctx-size, -t/--threads, -b/--batch-size, --cache-type, --mla-mode.
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "src/model/session.h"

namespace latte::cli {

struct SessionFlags {
  int64_t n_ctx = 0;  // 0: the session's default
  int threads = 0;
  int64_t batch = 512;
  std::string cache_type = "f16";
  std::string mla_mode = "auto";

  void add_to(CLI::App& app);
  // Validated options for a session; throws ggl::Error naming the flag for a bad value.
  SessionOptions options() const;
};

}  // namespace latte::cli
