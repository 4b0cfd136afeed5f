#include "src/cli/notes.h"

#include <cstdio>

#include "src/parallel/job.h"

namespace latte::cli {
namespace {

bool g_log_disabled = false;

void print(std::string_view prog, const char* kind, std::string_view text) {
  if (!log_enabled()) return;
  std::fprintf(stderr, "%.*s: %s: %.*s\n", static_cast<int>(prog.size()), prog.data(), kind,
               static_cast<int>(text.size()), text.data());
}

}  // namespace

void set_log_disabled(bool disabled) { g_log_disabled = disabled; }
// Ranks of an MPI job compute the same thing: rank 0 speaks for them.
bool log_enabled() { return !g_log_disabled && Job::get().rank() == 0; }
void note(std::string_view prog, std::string_view text) { print(prog, "note", text); }
void warning(std::string_view prog, std::string_view text) { print(prog, "warning", text); }

}  // namespace latte::cli
