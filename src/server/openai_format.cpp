#include "src/server/openai_format.h"

#include <fmt/format.h>

#include <chrono>
#include <random>

namespace latte::server {
namespace {

using nlohmann::json;

bool is_chat(const ReplyHeader& h) { return h.endpoint == Endpoint::kChatCompletions; }

// A token's text as OpenAI's `bytes`: its UTF-8 bytes, which need not be whole characters.
json token_bytes(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(static_cast<int>(c));
  return out;
}

json chunk_with(const ReplyHeader& h, json choice) {
  choice["index"] = 0;
  if (!choice.contains("finish_reason")) choice["finish_reason"] = nullptr;
  if (!choice.contains("logprobs")) choice["logprobs"] = nullptr;
  return {{"id", h.id},
          {"object", is_chat(h) ? "chat.completion.chunk" : "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", json::array({std::move(choice)})}};
}

}  // namespace

ReplyHeader new_reply_header(Endpoint endpoint, std::string model) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const uint64_t a = rng(), b = rng();
  ReplyHeader h;
  h.endpoint = endpoint;
  h.id = fmt::format("{}-{:016x}{:08x}", endpoint == Endpoint::kChatCompletions ? "chatcmpl" : "cmpl", a,
                     static_cast<uint32_t>(b));
  h.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  h.model = std::move(model);
  return h;
}

json usage_json(const ReplyUpdate& last) {
  return {{"prompt_tokens", last.prompt_tokens},
          {"completion_tokens", last.completion_tokens},
          {"total_tokens", last.prompt_tokens + last.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", last.cached_tokens}}}};
}

json logprobs_json(Endpoint endpoint, const std::vector<TokenLogprob>& logprobs) {
  if (endpoint == Endpoint::kChatCompletions) {
    json content = json::array();
    for (const TokenLogprob& t : logprobs) {
      json top = json::array();
      for (const auto& [token, lp] : t.top)
        top.push_back({{"token", token}, {"logprob", lp}, {"bytes", token_bytes(token)}});
      content.push_back(
          {{"token", t.token}, {"logprob", t.logprob}, {"bytes", token_bytes(t.token)}, {"top_logprobs", top}});
    }
    return {{"content", std::move(content)}, {"refusal", nullptr}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), offsets = json::array();
  for (const TokenLogprob& t : logprobs) {
    tokens.push_back(t.token);
    token_logprobs.push_back(t.logprob);
    json top = json::object();
    for (const auto& [token, lp] : t.top)
      if (!top.contains(token)) top[token] = lp;  // two ids of one text: the likelier one
    top_logprobs.push_back(std::move(top));
    offsets.push_back(t.text_offset);
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(offsets)}};
}

json completion_response(const ReplyHeader& h, const std::string& content, const std::string& reasoning,
                         const ReplyUpdate& last, const std::vector<TokenLogprob>* logprobs) {
  json choice = {{"index", 0},
                 {"finish_reason", last.finish_reason},
                 {"logprobs", logprobs ? logprobs_json(h.endpoint, *logprobs) : json(nullptr)}};
  if (is_chat(h)) {
    json message = {{"role", "assistant"}, {"content", content}};
    if (!reasoning.empty()) message["reasoning_content"] = reasoning;
    choice["message"] = std::move(message);
  } else {
    choice["text"] = content;
  }
  return {{"id", h.id},
          {"object", is_chat(h) ? "chat.completion" : "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", json::array({std::move(choice)})},
          {"usage", usage_json(last)}};
}

json role_chunk(const ReplyHeader& h) { return chunk_with(h, {{"delta", {{"role", "assistant"}, {"content", ""}}}}); }

json text_chunk(const ReplyHeader& h, const std::string& content, const std::string& reasoning,
                const std::vector<TokenLogprob>& logprobs) {
  json choice;
  if (is_chat(h)) {
    json delta = json::object();
    if (!content.empty()) delta["content"] = content;
    if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = content;
  }
  if (!logprobs.empty()) choice["logprobs"] = logprobs_json(h.endpoint, logprobs);
  return chunk_with(h, std::move(choice));
}

json finish_chunk(const ReplyHeader& h, const std::string& finish_reason) {
  if (!is_chat(h)) return chunk_with(h, {{"text", ""}, {"finish_reason", finish_reason}});
  return chunk_with(h, {{"delta", json::object()}, {"finish_reason", finish_reason}});
}

json usage_chunk(const ReplyHeader& h, const ReplyUpdate& last) {
  json j = chunk_with(h, json::object());
  j["choices"] = json::array();
  j["usage"] = usage_json(last);
  return j;
}

std::string sse_event(const json& j) {
  std::string s = "data: ";
  s += j.dump(-1, ' ', false, json::error_handler_t::replace);
  s += "\n\n";
  return s;
}

json models_json(const std::string& model, int64_t created, int64_t n_ctx_slot, int64_t n_vocab) {
  return {{"object", "list"},
          {"data", json::array({{{"id", model},
                                 {"object", "model"},
                                 {"created", created},
                                 {"owned_by", "latte"},
                                 {"meta", {{"n_ctx_slot", n_ctx_slot}, {"n_vocab", n_vocab}}}}})}};
}

json slots_json(const std::vector<SlotInfo>& slots) {
  json out = json::array();
  for (const SlotInfo& s : slots)
    out.push_back({{"id", s.id},
                   {"state", s.state},
                   {"is_processing", s.state != "idle"},
                   {"n_ctx", s.n_ctx},
                   {"n_past", s.n_past},
                   {"n_prompt_tokens", s.prompt_tokens},
                   {"n_decoded", s.generated_tokens},
                   {"n_cached", s.cached_tokens}});
  return out;
}

std::string metrics_text(const EngineMetrics& m) {
  std::string out;
  auto metric = [&out](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP latte_{0} {1}\n# TYPE latte_{0} {2}\nlatte_{0} {3}\n", name, help, type, value);
  };
  metric("requests_total", "counter", "Requests finished (completed, cut at a limit or cancelled).", m.requests_total);
  metric("requests_cancelled_total", "counter", "Requests whose client went away before the end.",
         m.requests_cancelled);
  metric("prompt_tokens_total", "counter", "Prompt tokens of the requests admitted (cached ones included).",
         m.prompt_tokens_total);
  metric("prompt_tokens_cached_total", "counter", "Prompt tokens taken from the cache instead of evaluated.",
         m.prompt_tokens_cached_total);
  metric("generated_tokens_total", "counter", "Tokens generated.", m.generated_tokens_total);
  metric("requests_processing", "gauge", "Requests in a slot.", m.processing);
  metric("requests_queued", "gauge", "Requests waiting for a slot.", m.queued);
  metric("slots_busy", "gauge", "Slots holding a request.", m.processing);
  metric("slots_total", "gauge", "Slots (--parallel).", m.n_slots);
  metric("cache_pages_total", "gauge", "Pages of the slots' cache pool (--cache-mem).", m.pool.pages);
  metric("cache_page_tokens", "gauge", "Tokens per cache page.", m.pool.page_tokens);
  metric("cache_pages_used", "gauge", "Cache pages a slot maps (a page shared by several counts once).",
         m.pool.pages_used);
  metric("cache_pages_cached", "gauge", "Cache pages of earlier prompts no slot maps, kept for reuse until needed.",
         m.pool.pages_cached);
  metric("cache_pages_reused_total", "counter", "Cache pages mapped from earlier prompts' rows instead of computed.",
         m.pool.pages_reused);
  metric("cache_full_total", "counter", "Requests ended early because the cache pool had no page for them.",
         m.cache_full_total);
  return out;
}

}  // namespace latte::server
