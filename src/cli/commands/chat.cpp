// `latte chat`: an interactive conversation with a model (src/chat/). On a terminal: line editing,
// history, slash commands, replies streamed token by token; with piped stdin: one message per line
// (or per blank-line-separated block with --multiline), replies on stdout, exit at the end.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ggml-like/core/error.h"
#include "src/chat/chat_session.h"
#include "src/chat/repl.h"
#include "src/cli/commands/commands.h"
#include "src/cli/default_model.h"
#include "src/cli/flags/flag_checks.h"
#include "src/cli/interrupt.h"
#include "src/cli/flags/parse_flags.h"
#include "src/cli/flags/prompt_flags.h"
#include "src/cli/flags/session_flags.h"
#include "src/cli/flags/sampling_flags.h"
#include "src/tokenizer/tokenizer.h"
#include "src/parallel/job.h"

namespace latte::cli {
namespace {

// The template named on the command line, else the one the model's Jinja template stands for,
// else plain (with a note when the model has a template latte does not recognise).
const ChatTemplate& choose_template(const ggl::Metadata& md, const std::string& requested) {
  if (!requested.empty()) return ChatTemplate::by_name(requested);
  const ggl::Value* jinja = md.find("tokenizer.chat_template");
  if (!jinja || !std::holds_alternative<std::string>(jinja->data)) return ChatTemplate::plain();
  if (const ChatTemplate* t = ChatTemplate::detect(std::get<std::string>(jinja->data))) return *t;
  std::fprintf(stderr,
               "latte chat: the model's chat template is not one latte knows; using plain "
               "(pick one with --chat-template, see --list-templates)\n");
  return ChatTemplate::plain();
}

std::string history_path() {
  const char* home = std::getenv("HOME");
  return home && *home ? std::string(home) + "/.latte_history" : std::string();
}

}  // namespace

int cmd_chat(int argc, char** argv) {
  CLI::App app{"Chat with a model: replies stream token by token; the conversation stays in the cache", argv[0]};
  std::string model_path, system_prompt, template_name;
  bool list_templates = false, hide_thinking = false, multiline = false, ignore_eos = false, context_shift = false,
       verbose = false;
  int64_t n_predict = -1;
  SessionFlags session_flags;
  PromptFlags prompt_flags;
  SamplingParams sampling;
  app.add_option("-m,--model", model_path, "GGUF model (default: the shipped tiny MLA story model)");
  app.add_option("--system-prompt", system_prompt,
                 "system prompt (also -sys TEXT; escapes such as \\n are processed, see --no-escape)");
  app.add_option("--chat-template", template_name,
                 "chat template (default: recognised from the model's tokenizer.chat_template, else plain); "
                 "see --list-templates");
  app.add_flag("--list-templates", list_templates, "list the chat templates and exit");
  app.add_option("-n,--n-predict", n_predict, "most tokens per reply (default -1: until end of generation)")
      ->check(integer(-1));
  app.add_flag("--ignore-eos", ignore_eos, "never end a reply at an end-of-generation token (use with -n)");
  app.add_flag("--hide-thinking", hide_thinking, "leave reasoning models' <think>...</think> spans out of the output");
  app.add_flag("--multiline", multiline,
               "an input is every line up to a blank line (default: one line; also -mli, --multiline-input)");
  app.add_flag("--context-shift", context_shift,
               "when the context is full, shift the cache over the dropped turns instead of evaluating the kept ones "
               "again (instant, but approximate: see docs/chat.md)");
  app.add_flag("-v,--verbose", verbose, "print a line per turn on stderr: tokens evaluated and generated, speeds");
  prompt_flags.add_to(app);
  session_flags.add_to(app);
  add_sampling_flags(app, sampling);
  if (auto done = parse_flags(app, argc, argv)) return *done;
  prompt_flags.check_mode(app, /*is_chat=*/true);

  if (list_templates) {
    for (const ChatTemplate& t : ChatTemplate::all())
      std::printf("%-12s %s\n", t.name().data(), t.description().data());
    return 0;
  }

  const SessionOptions session_options = session_flags.options();
  if (model_path.empty()) model_path = default_model_path();
  const Model model(model_path, session_flags.model_options(model_path));
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_gguf(model.file());
  const ChatTemplate& chat_template = choose_template(model.file().metadata(), template_name);
  Session session(model, session_options);
  session_flags.warn_beyond_training(model.hparams(), session.n_ctx());
  session_flags.note_offload(session);
  share_seed_across_ranks(sampling);
  Sampler sampler(sampling);
  ChatSession chat(session, *tokenizer, chat_template, sampler,
                   {.n_predict = n_predict, .ignore_eos = ignore_eos, .context_shift = context_shift});
  if (!system_prompt.empty()) chat.set_system(prompt_flags.text(system_prompt));

  ReplOptions repl;
  repl.terminal = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
  repl.multiline = multiline;
  repl.hide_thinking = hide_thinking;
  repl.verbose = verbose;
  // (Under mpirun stdout is a pseudo-terminal of Open MPI's whatever mpirun's is: answers to stderr.)
  repl.status = isatty(STDOUT_FILENO) && Job::get().alone() ? stdout : stderr;
  if (Job::get().rank() != 0) repl.status = std::fopen("/dev/null", "w");  // rank 0 answers for every rank
  if (repl.terminal) {
    repl.history_path = history_path();
    std::fprintf(stderr, "%s\n",
                 fmt::format("latte chat: {} ({}, template {}, context {} tokens, {} cache, seed {}). /help lists "
                             "the commands; Ctrl-D quits.",
                             model_path, model.hparams().arch_name, chat_template.name(), session.n_ctx(),
                             ggl::type_name(session.cache().type()), sampler.seed())
                     .c_str());
  }
  return run_chat_repl(chat, repl, install_interrupt_flag());
}

}  // namespace latte::cli
