// The per-token arithmetic of llama.cpp's perplexity tool, kept to its exact operations and types
// (float logits, a double sum of float exponentials) so that latte's numbers and the base files
// it writes agree with llama-perplexity's:
//  - the negative log-likelihood of the next token under a row of logits;
//  - a row of log-probabilities compressed to uint16 (the --kl-divergence-base file's rows);
//  - the KL divergence and top-token agreement of a row of logits against such a compressed row.
#pragma once
#include <cstdint>
#include <span>

namespace latte::eval {

// -log softmax(logits)[token], as llama-perplexity computes it without a base file.
double token_nll(std::span<const float> logits, int32_t token);

// uint16 values per compressed row: two floats (scale, smallest log-probability kept), then one
// value per vocabulary entry, padded to an even count.
int64_t compressed_row_size(int64_t n_vocab);

// Writes logits' log-probabilities into row (compressed_row_size(logits.size()) values): each
// entry within 16 nats of the largest logit as round((logit - min) / scale), below that 0. Returns
// the token's negative log-likelihood as llama-perplexity computes it on this path.
double compress_log_probs(std::span<const float> logits, int32_t token, std::span<uint16_t> row);

// Running sums over the scored tokens of a KL divergence run (llama-perplexity's, field by field).
struct KlSums {
  double nll = 0, nll2 = 0;            // the model's negative log-likelihoods and their squares
  double nll_base = 0, nll_base2 = 0;  // the base's, from its compressed rows
  double nll_nll_base = 0;             // their products
  double kld = 0, kld2 = 0;
  double p_diff = 0, p_diff2 = 0, p_diff4 = 0;  // p(token) - p_base(token)
  float max_p_diff = 0;
  int64_t same_top = 0;  // tokens where both put the largest probability on the same entry
  int64_t count = 0;
};

struct KlToken {
  double kld;    // KL(base || model) at this token
  float p_diff;  // p(token) - p_base(token)
};

// Compares a row of the model's logits with the base's compressed row at the same position,
// adding to sums.
KlToken compare_with_base(std::span<const float> logits, std::span<const uint16_t> base_row, int32_t token,
                          KlSums& sums);

}  // namespace latte::eval
