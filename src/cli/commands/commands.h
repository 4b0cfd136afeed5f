// The `latte` subcommands. Each parses its own flags (CLI11) from argv, where argv[0] is
// "latte <name>", and returns the process exit code. Errors are reported by main().
#pragma once

namespace latte::cli {

using CommandFn = int (*)(int argc, char** argv);

struct Command {
  const char* name;
  const char* summary;
  CommandFn run;
  // Whether it runs on the ranks of an MPI job (`mpirun -np N latte NAME`, docs/scale-out.md): the
  // commands that evaluate a model in step on every rank, printing on rank 0.
  bool across_ranks = false;
};

// Every subcommand, in the order `latte --help` lists them. Defined in commands.cpp.
extern const Command kCommands[];
extern const int kCommandCount;

int cmd_info(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_convert(int argc, char** argv);
int cmd_quantize(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_perplexity(int argc, char** argv);
int cmd_imatrix(int argc, char** argv);
int cmd_chat(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_batched_bench(int argc, char** argv);
int cmd_synth(int argc, char** argv);

}  // namespace latte::cli
