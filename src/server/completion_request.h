// The body of POST /v1/completions and /v1/chat/completions, read and checked: OpenAI's fields
// (and llama-server's extras top_k, min_p, repeat_penalty, ignore_eos) with the server's sampling
// flags as the defaults, as llama-server does. Unknown fields are ignored, so OpenAI clients that
// send more work; a field of the wrong type or out of range is an ApiError (400) naming it.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/chat/chat_template.h"
#include "src/sampling/sampling_params.h"

namespace latte::server {

enum class Endpoint { kCompletions, kChatCompletions };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::vector<ChatMessage> messages;               // chat: the conversation, in order
  std::string prompt;                              // completions: the prompt as text...
  std::optional<std::vector<int32_t>> prompt_ids;  // ...or as token ids (llama-server accepts both)
  SamplingParams sampling;
  float presence_penalty = 0.0f;   // OpenAI's, over the tokens generated so far
  float frequency_penalty = 0.0f;  // [-2, 2] each
  int64_t max_tokens = -1;         // -1: until end of generation or a full context
  std::vector<std::string> stop;   // the reply ends before the first of these (not included)
  bool ignore_eos = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
  int logprobs = -1;           // -1: none; else each token's logprob with this many alternatives (0..20)
  bool cache_prompt = true;    // llama-server's: false evaluates the whole prompt, reusing no cached prefix
  std::string model;           // echoed back; the server has one model whatever is asked
};

// Parses a request body. `defaults` are the sampling settings of the server's flags. Throws
// ApiError (400) for malformed JSON, a missing messages/prompt, a field of the wrong type, a value
// out of range, or something this server does not do (n > 1, several prompts).
CompletionRequest parse_completion_request(const std::string& body, Endpoint endpoint, const SamplingParams& defaults);

// The body parsed as a JSON object; ApiError (400) when it is not one.
nlohmann::json parse_json_object(const std::string& body);

}  // namespace latte::server
