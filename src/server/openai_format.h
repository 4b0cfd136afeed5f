// The JSON and text the server answers with, in OpenAI's shapes (and llama-server's for /slots,
// /tokenize and /metrics): whole responses, server-sent-event chunks, the model list. No HTTP here.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "src/server/completion_request.h"
#include "src/server/engine.h"

namespace latte::server {

// What is common to every response and chunk of one request.
struct ReplyHeader {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;  // chatcmpl-... / cmpl-...
  int64_t created = 0;
  std::string model;
};

// A fresh reply header: a random id with the endpoint's prefix and the current time.
ReplyHeader new_reply_header(Endpoint endpoint, std::string model);

// OpenAI's usage, with prompt_tokens_details.cached_tokens: the prompt tokens the prompt cache held.
nlohmann::json usage_json(const ReplyUpdate& last);

// OpenAI's logprobs of a choice: chat {"content": [{token, logprob, bytes, top_logprobs}]},
// completions {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}.
nlohmann::json logprobs_json(Endpoint endpoint, const std::vector<TokenLogprob>& logprobs);

// The non-streamed response for a whole reply (`last` carries the finish reason and usage;
// logprobs: the reply's, or nullptr when not asked).
nlohmann::json completion_response(const ReplyHeader& h, const std::string& content, const std::string& reasoning,
                                   const ReplyUpdate& last, const std::vector<TokenLogprob>* logprobs = nullptr);

// Streamed chunks. The first chunk of a chat reply carries the role; text chunks carry content or
// reasoning_content; the finish chunk an empty delta and the reason; the usage chunk no choices.
nlohmann::json role_chunk(const ReplyHeader& h);
nlohmann::json text_chunk(const ReplyHeader& h, const std::string& content, const std::string& reasoning,
                          const std::vector<TokenLogprob>& logprobs = {});
nlohmann::json finish_chunk(const ReplyHeader& h, const std::string& finish_reason);
nlohmann::json usage_chunk(const ReplyHeader& h, const ReplyUpdate& last);
// One server-sent event: "data: <json>\n\n".
std::string sse_event(const nlohmann::json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

nlohmann::json models_json(const std::string& model, int64_t created, int64_t n_ctx_slot, int64_t n_vocab);
nlohmann::json slots_json(const std::vector<SlotInfo>& slots);
// Prometheus' text exposition format.
std::string metrics_text(const EngineMetrics& m);

}  // namespace latte::server
