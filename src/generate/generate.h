// The token-by-token generation loop shared by `latte run` and `latte chat`: sample, stream the
// text, feed the token back through the cache, until an end-of-generation token, a token limit,
// a full context or a stop request.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "src/runtime/session.h"
#include "src/sampling/sampler.h"
#include "src/tokenizer/stream_decoder.h"

namespace latte {

enum class StopReason { kEndOfGeneration, kTokenLimit, kContextFull, kInterrupted };

struct GenerateResult {
  std::vector<int32_t> tokens;  // the sampled tokens, the end-of-generation token included
  StopReason reason = StopReason::kTokenLimit;
};

struct GenerateOptions {
  int64_t max_tokens = -1;                  // -1: until the context is full
  const std::atomic<bool>* stop = nullptr;  // polled between tokens
  bool ignore_eog = false;                  // never sample end-of-generation tokens (--ignore-eos)
};

// Continues a session whose last evaluated token produced `logits` ([n_vocab]). Each sampled
// token is accepted by the sampler, decoded through `decoder` (its text, possibly empty, goes to
// on_text) and evaluated, except an end-of-generation token, which is returned but not evaluated.
GenerateResult generate(Session& session, Sampler& sampler, const Tokenizer& tokenizer, StreamDecoder& decoder,
                        std::vector<float> logits, const GenerateOptions& options,
                        const std::function<void(std::string_view)>& on_text);

}  // namespace latte
