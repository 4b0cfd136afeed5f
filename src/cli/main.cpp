// latte: one binary, git-style subcommands (`latte info`, `latte run`, ...).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "src/cli/commands/commands.h"

#ifndef LATTE_VERSION
#define LATTE_VERSION "unknown"
#endif
#ifndef LATTE_GIT_COMMIT
#define LATTE_GIT_COMMIT "unknown"
#endif

namespace {

void print_usage(FILE* out) {
  std::fprintf(out,
               "usage: latte <command> [options]   (latte <command> --help, or latte help <command>, for its "
               "options)\n\ncommands:\n");
  for (int i = 0; i < latte::cli::kCommandCount; ++i)
    std::fprintf(out, "  %-10s %s\n", latte::cli::kCommands[i].name, latte::cli::kCommands[i].summary);
  std::fprintf(out, "  %-10s %s\n  %-10s %s\n", "help",
               "latte help COMMAND: the command's options (= latte COMMAND --help)", "version",
               "the version and the git commit latte was built from (also --version)");
}

const latte::cli::Command* find_command(const std::string& name) {
  for (int i = 0; i < latte::cli::kCommandCount; ++i)
    if (name == latte::cli::kCommands[i].name) return &latte::cli::kCommands[i];
  return nullptr;
}

// Errors before a command runs, in the commands' format: one line, exit code 1.
int fail(const std::string& message) {
  std::fprintf(stderr, "latte: error: %s\n", message.c_str());
  return 1;
}

int run_command(const latte::cli::Command& cmd, int argc, char** argv) {
  std::string prog = std::string("latte ") + cmd.name;
  argv[0] = prog.data();
  try {
    return cmd.run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "latte %s: error: %s\n", cmd.name, e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return fail("no command given (latte --help lists them)");
  const std::string name = argv[1];
  if (name == "-h" || name == "--help" || (name == "help" && argc == 2)) {
    print_usage(stdout);
    return 0;
  }
  if (name == "--version" || name == "version") {
    std::printf("latte %s (commit %s)\n", LATTE_VERSION, LATTE_GIT_COMMIT);
    return 0;
  }
  if (name == "help") {  // latte help CMD: CMD --help
    const latte::cli::Command* cmd = find_command(argv[2]);
    if (!cmd) return fail("unknown command '" + std::string(argv[2]) + "' (latte --help lists them)");
    char help[] = "--help";
    char* args[] = {argv[2], help, nullptr};
    return run_command(*cmd, 2, args);
  }
  const latte::cli::Command* cmd = find_command(name);
  if (!cmd) return fail("unknown command '" + name + "' (latte --help lists them)");
  return run_command(*cmd, argc - 1, argv + 1);
}
