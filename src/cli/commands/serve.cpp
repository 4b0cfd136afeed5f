// `latte serve`: an OpenAI-compatible HTTP server with continuous batching (docs/server.md). Loads
// the model, starts the engine (src/server/engine.h: one BatchSession sequence per slot) and the
// HTTP server, and serves until SIGINT or SIGTERM, after which it drains: new requests get 503,
// running ones finish (or are cut with a last chunk after 8 s), then it exits 0. Under
// `mpirun -np N`, every rank serves --parallel slots of its own and rank 0 takes the requests
// (data-parallel attention, docs/scale-out.md).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "ggml-like/core/error.h"
#include "src/chat/chat_template.h"
#include "src/cli/commands/commands.h"
#include "src/cli/default_model.h"
#include "src/cli/flags/flag_checks.h"
#include "src/cli/flags/parse_flags.h"
#include "src/cli/flags/sampling_flags.h"
#include "src/cli/flags/session_flags.h"
#include "src/cli/notes.h"
#include "src/model/kv_cache.h"
#include "src/parallel/job.h"
#include "src/placement/byte_size.h"
#include "src/server/engine.h"
#include "src/server/http_server.h"
#include "src/tokenizer/tokenizer.h"

namespace latte::cli {
namespace {

// How long running requests may go on after SIGINT/SIGTERM before they are cut, and how long the
// handlers then have to write their last chunks: within the 10 s a service manager waits.
constexpr auto kDrainTime = std::chrono::seconds(8);
constexpr auto kFlushTime = std::chrono::milliseconds(1500);

// The template named on the command line, else the one the model's Jinja template stands for,
// else plain (with a note when the model has one latte does not recognise).
const ChatTemplate& serve_chat_template(const ggl::Metadata& md, const std::string& requested) {
  if (!requested.empty()) return ChatTemplate::by_name(requested);
  const ggl::Value* jinja = md.find("tokenizer.chat_template");
  if (!jinja || !std::holds_alternative<std::string>(jinja->data)) return ChatTemplate::plain();
  if (const ChatTemplate* t = ChatTemplate::detect(std::get<std::string>(jinja->data))) return *t;
  note("latte serve", "the model's chat template is not one latte knows; using plain (see --chat-template)");
  return ChatTemplate::plain();
}

sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// Waits for SIGINT/SIGTERM (blocked in every thread, taken here with sigwait), then shuts down
// gracefully: the engine refuses new jobs, running ones get kDrainTime to end (a second signal cuts
// them at once), then whatever still runs is cut, the handlers get kFlushTime to send their last
// chunks, and the HTTP server stops, which ends listen() in the main thread.
void serve_until_signal(server::Engine& engine, server::HttpServer& http, const std::atomic<bool>& finished) {
  const sigset_t set = shutdown_signals();
  int sig = 0;
  sigwait(&set, &sig);
  if (finished.load()) return;  // listen() ended by itself; the main thread woke us
  if (log_enabled()) std::fprintf(stderr, "latte serve: shutting down (signal %d)\n", sig);
  engine.drain();
  const auto busy = [&] { return !engine.idle() || http.active_requests() > 0; };
  const timespec poll{0, 50'000'000};
  const auto drain_end = std::chrono::steady_clock::now() + kDrainTime;
  while (busy() && std::chrono::steady_clock::now() < drain_end) {
    if (sigtimedwait(&set, nullptr, &poll) > 0) break;  // a second signal: cut now
  }
  engine.cut_all();
  const auto flush_end = std::chrono::steady_clock::now() + kFlushTime;
  while (http.active_requests() > 0 && std::chrono::steady_clock::now() < flush_end)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  http.stop();
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  CLI::App app{"Serve a model over HTTP: OpenAI's chat/completions API with continuous batching", argv[0]};
  std::string model_path, template_name, alias;
  server::HttpOptions http_options;
  int n_parallel = 4, max_queued = 64;
  bool cache_prompt = true;
  int64_t max_body = 8 << 20;
  std::string cache_mem;
  SessionFlags session_flags;
  session_flags.batch = 2048;  // llama-server's -b: a step's tokens, decode and prompt chunks together
  SamplingParams sampling;
  app.add_option("-m,--model", model_path, "GGUF model (default: the shipped tiny MLA story model)");
  app.add_option("--host", http_options.host, "address to listen on")->capture_default_str();
  app.add_option("--port", http_options.port, "port to listen on (0: any free port)")
      ->check(integer(0, 65535))
      ->capture_default_str();
  app.add_option("--parallel", n_parallel, "slots: requests generated at once, in one batch (also -np)")
      ->check(integer(1, 256))
      ->capture_default_str();
  app.add_option("--max-queued", max_queued, "requests that may wait for a slot; more get 503")
      ->check(integer(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--api-key", http_options.api_key,
                 "require 'Authorization: Bearer KEY' on every endpoint but /health (default: $LATTE_API_KEY)");
  app.add_option("--alias", alias, "the model's name in /v1/models and replies (default: the file's name)");
  app.add_option("--chat-template", template_name,
                 "chat template (default: recognised from the model's tokenizer.chat_template, else plain)");
  app.add_option("--max-body-size", max_body, "largest request body in bytes; larger ones get 413")
      ->check(integer(1))
      ->capture_default_str();
  app.add_option("--threads-http", http_options.threads,
                 "connections served at once (default: slots + queue + 4, since a stream holds its connection)")
      ->check(integer(0, 4096));
  app.add_flag("--cache-prompt,!--no-cache-prompt", cache_prompt,
               "reuse the prefix a slot's cache shares with a new prompt, evaluating only the rest (default: on; "
               "llama-server's flags)");
  app.add_option("--cache-mem", cache_mem,
                 "memory of the cache pool all slots share, e.g. 2G or 512M (default: every slot's context at once); "
                 "less lets many slots with long contexts share what they really fill");
  session_flags.add_to(app);
  add_sampling_flags(app, sampling);
  app.get_option("-c")->description(
      "context of all slots together, divided evenly among them as llama-server does (default: each slot gets "
      "min(4096, the model's training context))");
  app.get_option("-b")->description(
      "most tokens evaluated in one step: every slot's next token plus prompt chunks "
      "(default 2048)");
  if (auto done = parse_flags(app, argc, argv)) return *done;
  sampling.validate();
  if (http_options.api_key.empty())
    if (const char* key = std::getenv("LATTE_API_KEY")) http_options.api_key = key;
  http_options.max_body_bytes = static_cast<size_t>(max_body);
  http_options.sampling = sampling;

  server::EngineOptions engine_options;
  engine_options.n_slots = n_parallel;
  engine_options.max_queued = max_queued;
  engine_options.prompt_cache = cache_prompt;
  engine_options.session = session_flags.options();
  if (model_path.empty()) model_path = default_model_path();
  const Model model(model_path, session_flags.model_options(model_path));
  if (session_flags.n_ctx > 0) {
    engine_options.session.n_ctx = session_flags.n_ctx / n_parallel;
    if (engine_options.session.n_ctx < 1)
      ggl::fail("-c {} is less than one token for each of {} slots", session_flags.n_ctx, n_parallel);
  } else {
    engine_options.session.n_ctx = default_context(model.hparams());
  }
  session_flags.warn_beyond_training(model.hparams(), engine_options.session.n_ctx);
  if (!cache_mem.empty()) {
    const std::optional<size_t> bytes = parse_byte_size(cache_mem);
    const size_t per_token = cache_bytes_per_token(model.hparams(), engine_options.session.cache_type);
    if (!bytes || *bytes < per_token)
      ggl::fail("--cache-mem '{}' is not a size of at least one token's cache ({} bytes), e.g. 2G or 512M", cache_mem,
                per_token);
    engine_options.pool.tokens = static_cast<int64_t>(*bytes / per_token);
  }
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_gguf(model.file());
  const ChatTemplate& chat_template = serve_chat_template(model.file().metadata(), template_name);
  http_options.model_name = alias.empty() ? std::filesystem::path(model_path).filename().string() : alias;

  // Blocked before any thread starts, so every thread inherits the mask and only sigwait sees them.
  const sigset_t signals = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is a failed write, not the end of the server

  // Under mpirun every rank serves its own slots, in step with the others (data parallelism);
  // rank 0 alone takes the HTTP requests, and the others run until it stops.
  Job& job = Job::get();
  if (!job.alone()) engine_options.job = &job;
  server::Engine engine(model, *tokenizer, engine_options);
  if (job.rank() != 0) {
    engine.stop();  // returns when rank 0's server stops
    return 0;
  }
  session_flags.note_offload(engine.batch().offload(), model.hparams(), engine.batch().device());
  server::HttpServer http(engine, *tokenizer, chat_template, http_options);
  const int port = http.bind();
  std::fprintf(
      stderr, "%s\n",
      fmt::format("latte serve: listening on http://{}:{} ({} slots{}, ctx {} each, cache pool {} tokens in "
                  "{}-token pages{}, template {})",
                  http_options.host, port, engine.n_slots(),
                  engine.ranks() > 1 ? fmt::format(" on each of {} ranks", engine.ranks()) : "", engine.slot_context(),
                  engine.pool_tokens(), engine.page_tokens(), engine.ranks() > 1 ? " a rank" : "", chat_template.name())
          .c_str());
  std::atomic<bool> finished{false};
  std::thread signal_thread([&] { serve_until_signal(engine, http, finished); });
  http.listen();
  finished.store(true);
  // listen() ended without a signal (an accept error): wake the signal thread so it can end.
  if (signal_thread.joinable()) {
    pthread_kill(signal_thread.native_handle(), SIGTERM);
    signal_thread.join();
  }
  engine.stop();
  return 0;
}

}  // namespace latte::cli
