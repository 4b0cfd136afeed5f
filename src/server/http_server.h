// The HTTP side of `latte serve` (docs/server.md): OpenAI's /v1/chat/completions,
// /v1/completions and /v1/models, and llama-server's /health, /metrics, /slots, /tokenize and
// /detokenize, and a chat page at /, over cpp-httplib. Handlers parse and check a request, hand a job to the Engine and
// write its updates, whole or as server-sent events; a client that goes away mid-stream cancels
// its job. Every error is answered as OpenAI's error JSON and the server keeps serving.
// httplib.h is included by http_server.cpp alone (it is heavy, and its defines must match the
// library's: CMakeLists.txt).
#pragma once
#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "src/chat/chat_template.h"
#include "src/sampling/sampling_params.h"
#include "src/server/engine.h"
#include "src/tokenizer/tokenizer.h"

namespace latte::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: any free port (bind() says which)
  std::string api_key;               // empty: no authentication
  size_t max_body_bytes = 8u << 20;  // larger request bodies: 413
  int threads = 0;                   // connections served at once; 0: enough for every slot and the queue
  std::string model_name;            // what /v1/models lists and replies name
  SamplingParams sampling;           // the defaults of a request's sampling fields
};

class HttpServer {
 public:
  // The engine, tokenizer and template must outlive the server.
  HttpServer(Engine& engine, const Tokenizer& tokenizer, const ChatTemplate& chat_template, HttpOptions options);
  ~HttpServer();

  // Binds the address; returns the port. Throws ggl::Error when it cannot.
  int bind();
  // Serves until stop(); returns then (after the connections' handlers ended).
  void listen();
  // Stops accepting and ends listen(). Streams still being written are cut: drain the engine first.
  void stop();
  // Requests whose response is still being produced or written.
  int active_requests() const { return active_->load(); }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<std::atomic<int>> active_;
};

}  // namespace latte::server
