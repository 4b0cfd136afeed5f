#include "src/server/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace latte::server {

TokenLogprob token_logprob(std::span<const float> logits, int32_t chosen, int n_top, const Tokenizer& tokenizer) {
  // log softmax: x - (max + log sum exp(x - max)), in double so a large vocabulary sums stably.
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  const double log_z = max + std::log(sum);
  const auto logprob = [&](int32_t id) { return static_cast<float>(logits[static_cast<size_t>(id)] - log_z); };

  TokenLogprob out;
  out.token = tokenizer.token_to_piece(chosen);
  out.logprob = logprob(chosen);
  const size_t n = std::min(static_cast<size_t>(std::max(n_top, 0)), logits.size());
  if (n == 0) return out;
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  // Ties go to the lower id, so the order is the same on every run.
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  });
  for (size_t i = 0; i < n; ++i) out.top.emplace_back(tokenizer.token_to_piece(ids[i]), logprob(ids[i]));
  return out;
}

}  // namespace latte::server
