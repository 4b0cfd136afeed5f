// latte: one binary, git-style subcommands (`latte info`, `latte run`, ...).
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <thread>

#include "ggml-like/core/error.h"
#include "src/cli/commands/commands.h"
#include "src/parallel/job.h"

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

// The command's exit code; its error is printed, or, with `error`, kept there for the caller.
int run_command(const latte::cli::Command& cmd, int argc, char** argv, std::string* error = nullptr) {
  std::string prog = std::string("latte ") + cmd.name;
  argv[0] = prog.data();
  try {
    return cmd.run(argc, argv);
  } catch (const std::exception& e) {
    const std::string line = std::string("latte ") + cmd.name + ": error: " + e.what() + "\n";
    if (error)
      *error = line;
    else
      std::fputs(line.c_str(), stderr);
    return 1;
  }
}

// Under mpirun: every rank must run the same command line; the command runs on every rank, and a
// rank that fails ends them all (its error printed first).
int run_across_ranks(latte::Job& job, const latte::cli::Command& cmd, int argc, char** argv) {
  try {
    if (!cmd.across_ranks)
      ggl::fail(
          "latte {} does not run across the ranks of an MPI job (run, chat, serve, eval, perplexity, "
          "bench and batched-bench do): start it without mpirun",
          cmd.name);
    std::string line;
    for (int i = 0; i < argc; ++i) line += std::string(argv[i]) + '\0';
    job.check_same("a command line", latte::job_hash(line));
  } catch (const std::exception& e) {
    // Every rank finds it; rank 0 says it, and ends the job (the others give it time to).
    if (job.rank() == 0)
      std::fprintf(stderr, "latte %s: error: %s\n", cmd.name, e.what());
    else
      std::this_thread::sleep_for(std::chrono::seconds(5));
    job.abort(1);
  }
  std::string error;
  const int code = run_command(cmd, argc, argv, &error);
  if (code != 0) {
    // Every rank ending with the same failure (a file every rank reads, a chat command that failed
    // on piped input) ends cleanly, rank 0 saying why once; a rank failing alone, while the others
    // wait for it, says why and ends them all.
    try {
      job.meet("ending the command", 5);
      if (job.rank() == 0) std::fputs(error.c_str(), stderr);
    } catch (const std::exception&) {
      std::fputs(error.c_str(), stderr);
      job.abort(code);
    }
  }
  job.finish();
  return code;
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
  latte::Job* job = nullptr;
  if (name == "serve") {
    // serve takes SIGINT/SIGTERM with sigwait in a thread of its own, every other thread having
    // them blocked: also the threads MPI starts when the job is joined, just below.
    sigset_t shutdown;
    sigemptyset(&shutdown);
    sigaddset(&shutdown, SIGINT);
    sigaddset(&shutdown, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &shutdown, nullptr);
  }
  try {
    job = &latte::Job::get();
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  if (!job->alone()) return run_across_ranks(*job, *cmd, argc - 1, argv + 1);
  return run_command(*cmd, argc - 1, argv + 1);
}
