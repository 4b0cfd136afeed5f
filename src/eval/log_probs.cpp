#include "src/eval/log_probs.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace latte::eval {
namespace {

float largest(std::span<const float> logits) { return *std::max_element(logits.begin(), logits.end()); }

// sum_i exp(logits[i] - max): float exponentials summed in double, as the reference does.
double sum_exp(std::span<const float> logits, float max_logit) {
  double sum = 0.0;
  for (float v : logits) sum += std::exp(v - max_logit);
  return sum;
}

// A compressed row's two leading floats.
struct RowScale {
  float scale;
  float min_log_prob;
};

}  // namespace

double token_nll(std::span<const float> logits, int32_t token) {
  const float max_logit = largest(logits);
  return -(logits[static_cast<size_t>(token)] - max_logit - std::log(sum_exp(logits, max_logit)));
}

int64_t compressed_row_size(int64_t n_vocab) { return 2 * ((n_vocab + 1) / 2) + 4; }

double compress_log_probs(std::span<const float> logits, int32_t token, std::span<uint16_t> row) {
  const auto [lo, hi] = std::minmax_element(logits.begin(), logits.end());
  const float max_logit = *hi;
  // Entries more than 16 nats below the top are all stored as the floor.
  const float min_logit = std::max(*lo, max_logit - 16);
  const float log_sum_exp = static_cast<float>(std::log(sum_exp(logits, max_logit)));
  const RowScale head{(max_logit - min_logit) / 65535.f, min_logit - max_logit - log_sum_exp};
  std::memcpy(row.data(), &head, sizeof head);
  std::span<uint16_t> values = row.subspan(sizeof head / sizeof(uint16_t));
  std::fill(values.begin(), values.end(), uint16_t{0});
  if (head.scale != 0.0f) {
    const float inv_scale = 1 / head.scale;
    for (size_t i = 0; i < logits.size(); ++i)
      if (logits[i] > min_logit) values[i] = static_cast<uint16_t>(std::nearbyint(inv_scale * (logits[i] - min_logit)));
  }
  return max_logit + log_sum_exp - logits[static_cast<size_t>(token)];
}

KlToken compare_with_base(std::span<const float> logits, std::span<const uint16_t> base_row, int32_t token,
                          KlSums& sums) {
  const size_t n_vocab = logits.size();
  float max_logit = logits[0];
  size_t top = 0;
  for (size_t i = 1; i < n_vocab; ++i)
    if (logits[i] > max_logit) max_logit = logits[i], top = i;
  const float log_sum_exp = static_cast<float>(std::log(sum_exp(logits, max_logit)));
  RowScale head;
  std::memcpy(&head, base_row.data(), sizeof head);
  const std::span<const uint16_t> base = base_row.subspan(sizeof head / sizeof(uint16_t));
  const size_t tok = static_cast<size_t>(token);

  const float nll = max_logit + log_sum_exp - logits[tok];
  sums.nll += nll;
  sums.nll2 += nll * nll;
  const float nll_base = -(head.scale * base[tok] + head.min_log_prob);
  sums.nll_base += nll_base;
  sums.nll_base2 += nll_base * nll_base;
  sums.nll_nll_base += nll * nll_base;

  // KL(base || model) = sum_i p_base(i) (log p_base(i) - log p(i)), over the entries the base kept.
  const float log_norm = max_logit + log_sum_exp;
  double kld = 0;
  size_t top_base = 0;
  float top_base_log_prob = 0;
  for (size_t i = 0; i < n_vocab; ++i) {
    const float log_p_base = head.scale * base[i] + head.min_log_prob;
    if (i == 0 || log_p_base > top_base_log_prob) top_base_log_prob = log_p_base, top_base = i;
    if (log_p_base > -16.f) kld += std::exp(log_p_base) * (log_p_base - logits[i] + log_norm);
  }
  sums.kld += kld;
  sums.kld2 += kld * kld;
  ++sums.count;
  if (top == top_base) ++sums.same_top;

  const float p_diff = std::exp(-nll) - std::exp(-nll_base);
  sums.p_diff += p_diff;
  const double p_diff2 = p_diff * p_diff;
  sums.p_diff2 += p_diff2;
  sums.p_diff4 += p_diff2 * p_diff2;
  sums.max_p_diff = std::max(sums.max_p_diff, std::fabs(p_diff));
  return {kld, p_diff};
}

}  // namespace latte::eval
