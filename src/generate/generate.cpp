#include "src/generate/generate.h"

#include <limits>

namespace latte {

GenerateResult generate(Session& session, Sampler& sampler, const Tokenizer& tokenizer, StreamDecoder& decoder,
                        std::vector<float> logits, const GenerateOptions& options,
                        const std::function<void(std::string_view)>& on_text) {
  GenerateResult result;
  while (true) {
    if (options.stop && options.stop->load()) {
      result.reason = StopReason::kInterrupted;
      break;
    }
    if (options.max_tokens >= 0 && static_cast<int64_t>(result.tokens.size()) >= options.max_tokens) {
      result.reason = StopReason::kTokenLimit;
      break;
    }
    if (options.ignore_eog)
      for (int32_t id : tokenizer.eog_ids()) logits[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
    int32_t token = sampler.sample(logits);
    sampler.accept(token);
    result.tokens.push_back(token);
    if (tokenizer.is_eog(token)) {
      result.reason = StopReason::kEndOfGeneration;
      break;
    }
    if (std::string text = decoder.push(token); !text.empty()) on_text(text);
    // The sampled token is part of the text even if nothing more can follow it.
    if (session.n_past() >= session.n_ctx()) {
      result.reason = StopReason::kContextFull;
      break;
    }
    logits = session.eval({&token, 1}, Logits::kLast);
  }
  if (std::string rest = decoder.flush(); !rest.empty()) on_text(rest);
  return result;
}

}  // namespace latte
