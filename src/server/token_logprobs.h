// The log-probabilities a reply reports (OpenAI's logprobs / top_logprobs): those of the model's
// own distribution, the softmax of the raw logits, before the request's sampling transforms
// (temperature, top-k/p, min-p, penalties, ignore_eos), as llama-server reports them with
// post_sampling_probs false. So they do not depend on the sampling settings, and a greedy reply's
// token is always the most likely one.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "src/tokenizer/tokenizer.h"

namespace latte::server {

struct TokenLogprob {
  std::string token;                               // the token's text (its bytes; may be part of a UTF-8 character)
  float logprob = 0.0f;                            // ln p(token)
  int64_t text_offset = 0;                         // where the token's text starts in the reply's generated text
  std::vector<std::pair<std::string, float>> top;  // the n most likely tokens, most likely first
};

// The most tokens top_logprobs may ask for (OpenAI's limit).
inline constexpr int kMaxTopLogprobs = 20;

// The chosen token's log-probability under softmax(logits) and the n_top most likely tokens'.
TokenLogprob token_logprob(std::span<const float> logits, int32_t chosen, int n_top, const Tokenizer& tokenizer);

}  // namespace latte::server
