// Perplexity over a text as llama.cpp's perplexity tool measures it: the text's tokens (BOS first
// when the vocabulary adds one) cut into chunks of n_ctx tokens, each evaluated from an empty
// cache with its first token replaced by BOS, and only the second half of each chunk scored (the
// tokens after positions n_ctx/2 .. n_ctx-2), so every prediction has at least n_ctx/2 tokens of
// context. PPL = exp(mean NLL); its error is PPL times the standard error of the mean NLL.
//
// With a KlBaseWriter the chunks' log-probabilities are saved for a later KL divergence run;
// kl_divergence() evaluates the base file's tokens and compares with its rows (log_probs.h).
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "src/eval/kl_base_file.h"
#include "src/eval/log_probs.h"
#include "src/runtime/session.h"
#include "src/tokenizer/tokenizer.h"

namespace latte::eval {

// The text's tokens as llama-perplexity makes them: BOS first when the vocabulary adds one,
// special-token text encoded as ordinary text.
std::vector<int32_t> text_tokens(const Tokenizer& tokenizer, std::string_view text);
// The token each chunk starts with: BOS when the vocabulary adds one, else -1 (none).
int32_t chunk_bos(const Tokenizer& tokenizer);

// The number of chunks a text of n_tokens yields: n_tokens / n_ctx, at most max_chunks when that
// is > 0. Throws ggl::Error when the text has fewer than 2 * n_ctx tokens (what the reference
// requires) or n_ctx is below 4.
int64_t chunk_count(int64_t n_tokens, int64_t n_ctx, int64_t max_chunks);

// The logits [n_ctx][n_vocab] of one chunk evaluated from an empty cache, its first token replaced
// by bos when bos >= 0.
std::vector<float> chunk_logits(Session& session, std::span<const int32_t> chunk, int32_t bos);

// Sums of the scored tokens' negative log-likelihoods and their squares.
struct NllSums {
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  double ppl() const;
  // PPL's uncertainty: ppl * sqrt(var(nll) / (count - 1)); 0 when the variance is not positive.
  double ppl_error() const;
};

// Adds the scored positions of one chunk's logits (chunk_logits) to sums; with base_rows (the
// chunk's rows for a KL base file, resized here) they are also compressed into it.
void score_chunk(std::span<const float> logits, std::span<const int32_t> chunk, int64_t n_vocab, NllSums& sums,
                 std::vector<uint16_t>* base_rows = nullptr);

struct PerplexityOptions {
  int64_t n_ctx = 512;
  int64_t n_chunk = 0;  // chunk_count()
  int32_t bos = -1;     // each chunk's first token; -1: none
  KlBaseWriter* base = nullptr;
  // After each chunk (1-based) with the running sums.
  std::function<void(int64_t chunk, const NllSums&)> on_chunk;
};

// The session's context must hold n_ctx tokens.
NllSums perplexity(Session& session, std::span<const int32_t> tokens, const PerplexityOptions& options);

struct KlResult {
  KlSums sums;
  std::vector<float> kld;     // per scored token, in order
  std::vector<float> p_diff;  // p(token) - p_base(token), in order
};

// Evaluates the base file's chunks (at most max_chunks when > 0) and compares each scored position
// with the base's row. on_chunk is called after each chunk (1-based) with the running sums.
KlResult kl_divergence(Session& session, KlBaseReader& base, int32_t bos, int64_t max_chunks,
                       const std::function<void(int64_t chunk, int64_t n_chunk, const KlSums&)>& on_chunk);

}  // namespace latte::eval
