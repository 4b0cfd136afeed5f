// `latte run`: one-shot completion. Evaluates the prompt, streams the continuation to stdout as it
// is generated, and prints a one-line summary (tokens and speeds) to stderr.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "ggml-like/core/error.h"
#include "src/cli/commands/commands.h"
#include "src/cli/default_model.h"
#include "src/cli/flags/flag_checks.h"
#include "src/cli/interrupt.h"
#include "src/cli/notes.h"
#include "src/cli/flags/parse_flags.h"
#include "src/cli/flags/prompt_flags.h"
#include "src/cli/flags/session_flags.h"
#include "src/cli/text_input.h"
#include "src/generate/generate.h"
#include "src/runtime/stopwatch.h"
#include "src/cli/flags/sampling_flags.h"
#include "src/tokenizer/tokenizer.h"
#include "src/cli/rank_summary.h"
#include "src/parallel/job.h"

namespace latte::cli {
namespace {

// Streams text to stdout and remembers how it ended, so the output can be closed with a newline
// (the stderr summary then starts on a line of its own when both go to one pipe or file).
class Output {
 public:
  void write(std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (!text.empty()) ends_with_newline_ = text.back() == '\n';
  }
  void finish_line() {
    if (!ends_with_newline_) write("\n");
  }

 private:
  bool ends_with_newline_ = true;  // nothing written yet: nothing to end
};

std::string rate(int64_t tokens, double seconds) {
  return seconds > 0 ? fmt::format("{:.1f} t/s", static_cast<double>(tokens) / seconds) : "- t/s";
}

}  // namespace

int cmd_run(int argc, char** argv) {
  CLI::App app{"Complete a prompt: stream the model's continuation to stdout", argv[0]};
  std::string model_path, prompt, prompt_file;
  int64_t n_predict = -1;
  bool no_bos = false, echo = false, special = false, ignore_eos = false;
  SessionFlags session_flags;
  PromptFlags prompt_flags;
  SamplingParams sampling;
  app.add_option("-m,--model", model_path, "GGUF model (default: the shipped tiny MLA story model)");
  auto* p = app.add_option("-p,--prompt", prompt, "prompt text (escapes such as \\n are processed; see --no-escape)");
  auto* f = app.add_option("-f,--file", prompt_file,
                           "read the prompt from a file (its last newline dropped, as llama.cpp does)");
  p->excludes(f);
  app.add_option("-n,--n-predict", n_predict, "tokens to generate (default -1: until end of text or a full context)")
      ->check(integer(-1));
  app.add_flag("--no-bos", no_bos, "do not put the BOS token before the prompt");
  app.add_flag("--echo", echo, "print the prompt before the continuation");
  app.add_flag("--ignore-eos", ignore_eos, "never end at an end-of-generation token");
  app.add_flag("--special", special, "parse special-token text in the prompt (e.g. <s>) as that token");
  prompt_flags.add_to(app);
  session_flags.add_to(app);
  add_sampling_flags(app, sampling);
  if (auto done = parse_flags(app, argc, argv)) return *done;
  prompt_flags.check_mode(app, /*is_chat=*/false);
  if (p->count() == 0 && f->count() == 0) ggl::fail("give a prompt with -p TEXT or -f FILE");
  prompt = f->count() ? without_final_newline(read_text_file(prompt_file, "prompt file")) : prompt_flags.text(prompt);
  const SessionOptions session_options = session_flags.options();

  const Stopwatch load_time;
  if (model_path.empty()) model_path = default_model_path();
  const Model model(model_path, session_flags.model_options(model_path));
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_gguf(model.file());
  Session session(model, session_options);
  share_seed_across_ranks(sampling);
  Sampler sampler(sampling);
  const double load_seconds = load_time.seconds();
  session_flags.warn_beyond_training(model.hparams(), session.n_ctx());
  session_flags.note_offload(session);

  const bool add_bos = !no_bos && tokenizer->add_bos_default() && tokenizer->bos() >= 0;
  const std::vector<int32_t> prompt_tokens = tokenizer->encode(prompt, add_bos, special);
  if (prompt_tokens.empty()) ggl::fail("the prompt is empty (and no BOS token is added)");
  if (static_cast<int64_t>(prompt_tokens.size()) > session.n_ctx())
    ggl::fail("the prompt has {} tokens, more than the context of {} (raise -c)", prompt_tokens.size(),
              session.n_ctx());

  std::atomic<bool>& interrupted = install_interrupt_flag();
  Output out;
  const auto write_out = [&out](std::string_view text) { out.write(text); };
  StreamDecoder decoder(*tokenizer);
  if (echo) {
    for (int32_t t : prompt_tokens) write_out(decoder.push(t));
  }
  for (int32_t t : prompt_tokens) sampler.accept(t);

  const Stopwatch prompt_time;
  std::vector<float> logits = session.eval(prompt_tokens, Logits::kLast);
  const double prompt_seconds = prompt_time.seconds();

  GenerateOptions options;
  options.max_tokens = n_predict;
  options.stop = &interrupted;
  options.ignore_eog = ignore_eos;
  // With --echo the decoder has seen the prompt; otherwise the continuation is a fresh stream
  // whose first piece keeps its leading space (it follows the prompt's text).
  StreamDecoder continuation(*tokenizer, {.render_special = false, .strip_leading_space = false});
  const Stopwatch generate_time;
  GenerateResult result =
      generate(session, sampler, *tokenizer, echo ? decoder : continuation, std::move(logits), options, write_out);
  const double generate_seconds = generate_time.seconds();
  out.finish_line();

  const auto generated = static_cast<int64_t>(result.tokens.size());
  std::string stop = result.reason == StopReason::kInterrupted   ? " (interrupted)"
                     : result.reason == StopReason::kContextFull ? " (context full)"
                                                                 : "";
  if (log_enabled())
    std::fprintf(stderr, "%s\n",
                 fmt::format("prompt: {} tokens, {} | generated: {} tokens, {}{} | seed: {} | load: {:.0f} ms",
                             prompt_tokens.size(), rate(static_cast<int64_t>(prompt_tokens.size()), prompt_seconds),
                             generated, rate(generated, generate_seconds), stop, sampler.seed(), load_seconds * 1000)
                     .c_str());
  if (log_enabled() && !Job::get().alone())  // expert parallelism: the share and the exchange
    std::fprintf(stderr, "%s\n",
                 rank_summary(model, Job::get().exchange_stats(),
                              static_cast<int64_t>(prompt_tokens.size()) + generated, prompt_seconds + generate_seconds)
                     .c_str());
  else if (log_enabled() && model.expert_pager())  // paged experts: what the run read from the file
    std::fprintf(stderr, "%s\n",
                 model.expert_pager()
                     ->describe(ExpertPager::Stats{}, static_cast<int64_t>(prompt_tokens.size()) + generated)
                     .c_str());
  // Stopped by Ctrl-C: the shell convention for a SIGINT-ended process (128 + 2), after the summary.
  return result.reason == StopReason::kInterrupted ? 130 : 0;
}

}  // namespace latte::cli
