// Settings of the token sampler, with the defaults users know from llama.cpp.
#pragma once
#include <cstdint>

namespace latte {

struct SamplingParams {
  float temp = 0.8f;            // temperature; 0 = greedy (always the most likely token)
  int32_t top_k = 40;           // keep the k most likely tokens; 0 = off
  float top_p = 0.95f;          // keep the smallest set of top tokens with this much probability; 1 = off
  float min_p = 0.05f;          // drop tokens less likely than min_p x the most likely one; 0 = off
  float repeat_penalty = 1.0f;  // divide positive / multiply negative logits of recent tokens; 1 = off
  int32_t repeat_last_n = 64;   // how many recent tokens the penalty looks at; 0 = off, -1 = all
  int64_t seed = -1;            // random seed; -1 = draw one from the system

  // Throws ggl::Error naming the flag for out-of-range values.
  void validate() const;
};

}  // namespace latte
