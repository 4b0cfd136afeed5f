// `latte run`: one-shot completion. Evaluates the prompt, streams the continuation to stdout as it
// is generated, and prints a one-line summary (tokens and speeds) to stderr.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "ggml-like/core/error.h"
#include "src/cli/commands.h"
#include "src/cli/parse_flags.h"
#include "src/cli/default_model.h"
#include "src/cli/interrupt.h"
#include "src/cli/session_flags.h"
#include "src/generate/generate.h"
#include "src/sampling/sampling_flags.h"
#include "src/tokenizer/tokenizer.h"

namespace latte::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string read_prompt_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ggl::fail("{}: cannot open the prompt file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_out(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

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
  SamplingParams sampling;
  app.add_option("-m,--model", model_path, "GGUF model (default: the shipped tiny MLA story model)");
  auto* p = app.add_option("-p,--prompt", prompt, "prompt text");
  auto* f = app.add_option("-f,--file", prompt_file, "read the prompt from a file");
  p->excludes(f);
  app.add_option("-n,--n-predict", n_predict, "tokens to generate (default -1: until end of text or a full context)")
      ->check(CLI::Range(int64_t{-1}, INT64_MAX));
  app.add_flag("--no-bos", no_bos, "do not put the BOS token before the prompt");
  app.add_flag("--echo", echo, "print the prompt before the continuation");
  app.add_flag("--ignore-eos", ignore_eos, "never end at an end-of-generation token");
  app.add_flag("--special", special, "parse special-token text in the prompt (e.g. <s>) as that token");
  session_flags.add_to(app);
  add_sampling_flags(app, sampling);
  if (auto done = parse_flags(app, argc, argv)) return *done;
  if (p->count() == 0 && f->count() == 0) ggl::fail("give a prompt with -p TEXT or -f FILE");
  if (f->count()) prompt = read_prompt_file(prompt_file);

  const auto load_start = Clock::now();
  if (model_path.empty()) model_path = default_model_path();
  const Model model(model_path);
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_gguf(model.file());
  Session session(model, session_flags.options());
  Sampler sampler(sampling);
  const double load_seconds = seconds_since(load_start);

  const bool add_bos = !no_bos && tokenizer->add_bos_default() && tokenizer->bos() >= 0;
  const std::vector<int32_t> prompt_tokens = tokenizer->encode(prompt, add_bos, special);
  if (prompt_tokens.empty()) ggl::fail("the prompt is empty (and no BOS token is added)");
  if (static_cast<int64_t>(prompt_tokens.size()) > session.n_ctx())
    ggl::fail("the prompt has {} tokens, more than the context of {} (raise -c)", prompt_tokens.size(),
              session.n_ctx());

  std::atomic<bool>& interrupted = install_interrupt_flag();
  StreamDecoder decoder(*tokenizer);
  if (echo) {
    for (int32_t t : prompt_tokens) write_out(decoder.push(t));
  }
  for (int32_t t : prompt_tokens) sampler.accept(t);

  const auto prompt_start = Clock::now();
  std::vector<float> logits = session.eval(prompt_tokens, Logits::kLast);
  const double prompt_seconds = seconds_since(prompt_start);

  GenerateOptions options;
  options.max_tokens = n_predict;
  options.stop = &interrupted;
  options.ignore_eog = ignore_eos;
  // With --echo the decoder has seen the prompt; otherwise the continuation is a fresh stream
  // whose first piece keeps its leading space (it follows the prompt's text).
  StreamDecoder continuation(*tokenizer, {.render_special = false, .strip_leading_space = false});
  const auto generate_start = Clock::now();
  GenerateResult result =
      generate(session, sampler, *tokenizer, echo ? decoder : continuation, std::move(logits), options, write_out);
  const double generate_seconds = seconds_since(generate_start);
  if (isatty(STDOUT_FILENO)) write_out("\n");

  const auto generated = static_cast<int64_t>(result.tokens.size());
  std::string stop = result.reason == StopReason::kInterrupted   ? " (interrupted)"
                     : result.reason == StopReason::kContextFull ? " (context full)"
                                                                 : "";
  std::fprintf(stderr, "%s\n",
               fmt::format("prompt: {} tokens, {} | generated: {} tokens, {}{} | load: {:.0f} ms",
                           prompt_tokens.size(), rate(static_cast<int64_t>(prompt_tokens.size()), prompt_seconds),
                           generated, rate(generated, generate_seconds), stop, load_seconds * 1000)
                   .c_str());
  return 0;
}

}  // namespace latte::cli
