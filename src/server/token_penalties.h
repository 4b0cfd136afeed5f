// OpenAI's presence and frequency penalties, which latte's Sampler does not have: before sampling,
// each token's logit is lowered by frequency_penalty x (times it was generated so far) plus
// presence_penalty once it was generated at all. Only generated tokens count, not the prompt's
// (OpenAI's definition; llama.cpp's --repeat-penalty, which looks at the prompt too, is separate).
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>

namespace latte::server {

class TokenPenalties {
 public:
  TokenPenalties(float presence, float frequency) : presence_(presence), frequency_(frequency) {}

  bool active() const { return presence_ != 0.0f || frequency_ != 0.0f; }
  // Lowers (or, for negative penalties, raises) the logits of the tokens generated so far.
  void apply(std::span<float> logits) const;
  void accept(int32_t token);

 private:
  float presence_, frequency_;
  std::unordered_map<int32_t, int> counts_;
};

}  // namespace latte::server
