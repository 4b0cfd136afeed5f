// latte: one binary, git-style subcommands (`latte info`, `latte run`, ...).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "src/cli/commands.h"

namespace {

void print_usage(FILE* out) {
  std::fprintf(out, "usage: latte <command> [options]   (latte <command> --help for its options)\n\ncommands:\n");
  for (int i = 0; i < latte::cli::kCommandCount; ++i)
    std::fprintf(out, "  %-10s %s\n", latte::cli::kCommands[i].name, latte::cli::kCommands[i].summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    print_usage(stdout);
    return 0;
  }
  for (int i = 0; i < latte::cli::kCommandCount; ++i) {
    const auto& cmd = latte::cli::kCommands[i];
    if (name != cmd.name) continue;
    std::string prog = std::string("latte ") + cmd.name;
    argv[1] = prog.data();
    try {
      return cmd.run(argc - 1, argv + 1);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "latte %s: error: %s\n", cmd.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "latte: unknown command '%s' (see latte --help)\n", name.c_str());
  return 2;
}
