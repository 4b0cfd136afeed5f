#include "src/server/http_server.h"

#include <httplib.h>

#include <chrono>
#include <algorithm>
#include <exception>
#include <iterator>
#include <utility>

#include "ggml-like/core/error.h"
#include "src/server/api_error.h"
#include "src/server/chat_page.h"
#include "src/server/completion_request.h"
#include "src/server/openai_format.h"
#include "src/server/request_prompt.h"
#include "src/tokenizer/stream_decoder.h"

namespace latte::server {
namespace {

using nlohmann::json;

// How long a streaming handler waits for the engine before it checks its connection again.
constexpr std::chrono::milliseconds kStreamPoll{100};

// Counts a request as in progress from its handler's start until its response is written (the
// guard rides along with a streaming response's content provider).
class ActiveRequest {
 public:
  explicit ActiveRequest(std::shared_ptr<std::atomic<int>> count) : count_(std::move(count)) { ++*count_; }
  ~ActiveRequest() { --*count_; }
  ActiveRequest(const ActiveRequest&) = delete;
  ActiveRequest& operator=(const ActiveRequest&) = delete;

 private:
  std::shared_ptr<std::atomic<int>> count_;
};

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json; charset=utf-8");
}

void send_api_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status(), e.to_json()); }

// One streamed reply: turns the engine's updates into server-sent events as they arrive.
class EventStream {
 public:
  EventStream(ReplyHeader header, std::shared_ptr<UpdateChannel> channel, bool include_usage,
              std::shared_ptr<ActiveRequest> active)
      : header_(std::move(header)),
        channel_(std::move(channel)),
        include_usage_(include_usage),
        active_(std::move(active)) {}

  // httplib's content provider: false ends the response (the client is gone: the job is cancelled).
  bool write_next(httplib::DataSink& sink) {
    if (header_.endpoint == Endpoint::kChatCompletions && !role_sent_) {
      role_sent_ = true;
      if (!send(sink, sse_event(role_chunk(header_)))) return false;
    }
    const std::vector<ReplyUpdate> updates = channel_->wait(kStreamPoll);
    if (updates.empty()) {
      if (sink.is_writable()) return true;
      channel_->cancel();
      return false;
    }
    for (const ReplyUpdate& u : updates) {
      if ((!u.content.empty() || !u.reasoning.empty() || !u.logprobs.empty()) &&
          !send(sink, sse_event(text_chunk(header_, u.content, u.reasoning, u.logprobs))))
        return false;
      if (!u.done) continue;
      if (!u.error.empty()) {
        if (!send(sink, sse_event(ApiError::error_body(500, "server_error", u.error)))) return false;
      } else {
        if (!send(sink, sse_event(finish_chunk(header_, u.finish_reason)))) return false;
        if (include_usage_ && !send(sink, sse_event(usage_chunk(header_, u)))) return false;
      }
      if (!send(sink, kSseDone)) return false;
      sink.done();
      return true;
    }
    return true;
  }

  void cancel() { channel_->cancel(); }

 private:
  bool send(httplib::DataSink& sink, const std::string& event) {
    if (sink.write(event.data(), event.size())) return true;
    channel_->cancel();
    return false;
  }

  ReplyHeader header_;
  std::shared_ptr<UpdateChannel> channel_;
  bool include_usage_;
  bool role_sent_ = false;
  std::shared_ptr<ActiveRequest> active_;
};

std::string bearer_token(const httplib::Request& req) {
  const std::string auth = req.get_header_value("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  return auth.starts_with(kBearer) ? auth.substr(kBearer.size()) : std::string();
}

}  // namespace

struct HttpServer::Impl {
  Engine& engine;
  const Tokenizer& tokenizer;
  const ChatTemplate& chat_template;
  HttpOptions options;
  std::shared_ptr<std::atomic<int>> active;
  httplib::Server http;
  int64_t created = 0;

  // Runs a handler, answering its ApiError (or any other exception, as a 500) in OpenAI's shape.
  httplib::Server::Handler guarded(void (Impl::*handler)(const httplib::Request&, httplib::Response&)) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      try {
        (this->*handler)(req, res);
      } catch (const ApiError& e) {
        send_api_error(res, e);
      } catch (const std::exception& e) {
        send_api_error(res, ApiError(500, "server_error", e.what()));
      }
    };
  }

  void completions(const httplib::Request& req, httplib::Response& res) { complete(req, res, Endpoint::kCompletions); }
  void chat_completions(const httplib::Request& req, httplib::Response& res) {
    complete(req, res, Endpoint::kChatCompletions);
  }

  void complete(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
    auto active_request = std::make_shared<ActiveRequest>(active);
    const CompletionRequest r = parse_completion_request(req.body, endpoint, options.sampling);
    EngineJob job;
    job.prompt = request_prompt(r, tokenizer, chat_template);
    job.sampling = r.sampling;
    job.presence_penalty = r.presence_penalty;
    job.frequency_penalty = r.frequency_penalty;
    job.max_tokens = r.max_tokens;
    job.stop = r.stop;
    job.ignore_eos = r.ignore_eos;
    job.cache_prompt = r.cache_prompt;
    job.logprobs = r.logprobs;
    job.chat = endpoint == Endpoint::kChatCompletions;
    job.starts_thinking = job.chat && chat_template.starts_thinking();
    std::shared_ptr<UpdateChannel> channel = engine.submit(std::move(job));
    ReplyHeader header = new_reply_header(endpoint, options.model_name);

    if (r.stream) {
      auto stream = std::make_shared<EventStream>(std::move(header), std::move(channel), r.include_usage,
                                                  std::move(active_request));
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream", [stream](size_t, httplib::DataSink& sink) { return stream->write_next(sink); },
          [stream](bool success) {
            if (!success) stream->cancel();
          });
      return;
    }
    // Whole replies: the client's connection is not watched meanwhile (httplib 0.11 cannot tell
    // while nothing is written); the job ends at its limits, or when the server shuts down.
    std::string content, reasoning;
    std::vector<TokenLogprob> logprobs;
    for (;;) {
      for (ReplyUpdate& u : channel->wait(std::chrono::milliseconds(500))) {
        content += u.content;
        reasoning += u.reasoning;
        std::move(u.logprobs.begin(), u.logprobs.end(), std::back_inserter(logprobs));
        if (!u.done) continue;
        if (!u.error.empty()) throw ApiError(500, "server_error", u.error);
        send_json(res, 200, completion_response(header, content, reasoning, u, r.logprobs >= 0 ? &logprobs : nullptr));
        return;
      }
    }
  }

  void models(const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, models_json(options.model_name, created, engine.slot_context(), tokenizer.n_vocab()));
  }

  void chat_page(const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(chat_page_html()), "text/html; charset=utf-8");
  }

  void health(const httplib::Request&, httplib::Response& res) { send_json(res, 200, {{"status", "ok"}}); }

  void metrics(const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(engine.metrics()), "text/plain; version=0.0.4");
  }

  void slots(const httplib::Request&, httplib::Response& res) { send_json(res, 200, slots_json(engine.slots())); }

  void tokenize(const httplib::Request& req, httplib::Response& res) {
    const json body = parse_json_object(req.body);
    const auto content = body.find("content");
    if (content == body.end() || !content->is_string()) bad_request("'content' must be a string");
    bool add_special = false;
    if (const auto it = body.find("add_special"); it != body.end()) {
      if (!it->is_boolean()) bad_request("'add_special' must be true or false");
      add_special = it->get<bool>() && tokenizer.bos() >= 0;
    }
    send_json(res, 200, {{"tokens", tokenizer.encode(content->get<std::string>(), add_special, true)}});
  }

  void detokenize(const httplib::Request& req, httplib::Response& res) {
    const json body = parse_json_object(req.body);
    const auto tokens = body.find("tokens");
    if (tokens == body.end() || !tokens->is_array()) bad_request("'tokens' must be an array of token ids");
    std::vector<int32_t> ids;
    for (const json& t : *tokens) {
      if (!t.is_number_integer()) bad_request("'tokens' must be an array of token ids");
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id >= tokenizer.n_vocab())
        bad_request("token id {} is outside the vocabulary (0..{})", id, tokenizer.n_vocab() - 1);
      ids.push_back(static_cast<int32_t>(id));
    }
    send_json(res, 200,
              {{"content", latte::detokenize(tokenizer, ids, {.render_special = true, .strip_leading_space = true})}});
  }

  void routes() {
    // Everything but /health and the chat page needs the key when one is set (the page asks the
    // user for it and sends it with its requests, as llama-server's web UI does).
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (options.api_key.empty() || req.path == "/health" || req.path == "/" || bearer_token(req) == options.api_key)
        return httplib::Server::HandlerResponse::Unhandled;
      send_api_error(res,
                     ApiError(401, "authentication_error", "invalid or missing API key (Authorization: Bearer KEY)"));
      return httplib::Server::HandlerResponse::Handled;
    });
    for (const char* path : {"/v1/chat/completions", "/chat/completions"})
      http.Post(path, guarded(&Impl::chat_completions));
    for (const char* path : {"/v1/completions", "/completions"}) http.Post(path, guarded(&Impl::completions));
    for (const char* path : {"/v1/models", "/models"}) http.Get(path, guarded(&Impl::models));
    http.Get("/", guarded(&Impl::chat_page));
    http.Get("/health", guarded(&Impl::health));
    http.Get("/metrics", guarded(&Impl::metrics));
    http.Get("/slots", guarded(&Impl::slots));
    http.Post("/tokenize", guarded(&Impl::tokenize));
    http.Post("/detokenize", guarded(&Impl::detokenize));
    // httplib's own errors (no route, a body over the limit, a malformed request) in the same shape.
    http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req,
                                                                       httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // ours already
      if (res.status == 404) {
        send_api_error(res, ApiError(404, "not_found_error", fmt::format("no endpoint {} {}", req.method, req.path)));
      } else if (res.status == 413) {
        send_api_error(res, ApiError(413, "invalid_request_error",
                                     fmt::format("the request body is larger than {} bytes (--max-body-size)",
                                                 options.max_body_bytes)));
      } else {
        send_api_error(res, ApiError(res.status, res.status >= 500 ? "server_error" : "invalid_request_error",
                                     fmt::format("HTTP {}", res.status)));
      }
      return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string message = "internal error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        message = e.what();
      } catch (...) {}
      send_api_error(res, ApiError(500, "server_error", message));
    });
  }
};

HttpServer::HttpServer(Engine& engine, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                       HttpOptions options)
    : active_(std::make_shared<std::atomic<int>>(0)) {
  impl_ = std::unique_ptr<Impl>(new Impl{engine, tokenizer, chat_template, std::move(options), active_, {}, 0});
  impl_->created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  // A streaming reply holds its connection's thread until it ends: enough threads for every slot
  // and queued request, plus a few for /health and the like.
  const int threads =
      impl_->options.threads > 0 ? impl_->options.threads : engine.n_slots() + std::min(engine.max_queued(), 64) + 4;
  impl_->http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  impl_->http.set_payload_max_length(impl_->options.max_body_bytes);
  impl_->http.set_keep_alive_timeout(2);  // idle connections close soon after a shutdown
  impl_->routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  const std::string& host = impl_->options.host;
  if (impl_->options.port == 0) {
    const int port = impl_->http.bind_to_any_port(host);
    if (port <= 0) ggl::fail("cannot listen on {} (any port)", host);
    return port;
  }
  if (!impl_->http.bind_to_port(host, impl_->options.port))
    ggl::fail("cannot listen on {}:{} (in use, or not an address of this machine?)", host, impl_->options.port);
  return impl_->options.port;
}

void HttpServer::listen() { impl_->http.listen_after_bind(); }

void HttpServer::stop() { impl_->http.stop(); }

}  // namespace latte::server
