#include "src/eval/perplexity.h"

#include <algorithm>
#include <cmath>

#include "ggml-like/core/error.h"

namespace latte::eval {

int32_t chunk_bos(const Tokenizer& tokenizer) {
  return tokenizer.add_bos_default() && tokenizer.bos() >= 0 ? tokenizer.bos() : -1;
}

std::vector<int32_t> text_tokens(const Tokenizer& tokenizer, std::string_view text) {
  return tokenizer.encode(text, chunk_bos(tokenizer) >= 0, false);
}

int64_t chunk_count(int64_t n_tokens, int64_t n_ctx, int64_t max_chunks) {
  if (n_ctx < 4) ggl::fail("a context of {} tokens is too small to score (at least 4)", n_ctx);
  if (n_tokens < 2 * n_ctx)
    ggl::fail("the text has {} tokens; a context of {} needs at least {} (2 * n_ctx)", n_tokens, n_ctx, 2 * n_ctx);
  const int64_t n = n_tokens / n_ctx;
  return max_chunks > 0 ? std::min(n, max_chunks) : n;
}

std::vector<float> chunk_logits(Session& session, std::span<const int32_t> chunk, int32_t bos) {
  std::vector<int32_t> ids(chunk.begin(), chunk.end());
  if (bos >= 0) ids.front() = bos;
  session.clear();
  return session.eval(ids, Logits::kAll);
}

double NllSums::ppl() const { return std::exp(nll / static_cast<double>(count)); }

double NllSums::ppl_error() const {
  const double n = static_cast<double>(count);
  const double mean = nll / n;
  const double var = nll2 / n - mean * mean;
  return var > 0 && count > 1 ? std::sqrt(var / (n - 1)) * ppl() : 0.0;
}

void score_chunk(std::span<const float> logits, std::span<const int32_t> chunk, int64_t n_vocab, NllSums& sums,
                 std::vector<uint16_t>* base_rows) {
  const int64_t n_ctx = static_cast<int64_t>(chunk.size());
  const int64_t first = n_ctx / 2, row = compressed_row_size(n_vocab);
  if (base_rows) base_rows->resize(static_cast<size_t>((n_ctx - 1 - first) * row));
  for (int64_t i = first; i < n_ctx - 1; ++i) {
    const std::span<const float> position = logits.subspan(static_cast<size_t>(i * n_vocab), n_vocab);
    const int32_t next = chunk[static_cast<size_t>(i + 1)];
    const double v = base_rows
                         ? compress_log_probs(position, next, std::span(*base_rows).subspan((i - first) * row, row))
                         : token_nll(position, next);
    sums.nll += v;
    sums.nll2 += v * v;
  }
  sums.count += n_ctx - 1 - first;
}

NllSums perplexity(Session& session, std::span<const int32_t> tokens, const PerplexityOptions& o) {
  NllSums sums;
  std::vector<uint16_t> rows;
  for (int64_t c = 0; c < o.n_chunk; ++c) {
    const std::span<const int32_t> chunk = tokens.subspan(c * o.n_ctx, o.n_ctx);
    const std::vector<float> logits = chunk_logits(session, chunk, o.bos);
    score_chunk(logits, chunk, session.n_vocab(), sums, o.base ? &rows : nullptr);
    if (o.base) o.base->write_chunk(rows);
    if (o.on_chunk) o.on_chunk(c + 1, sums);
  }
  return sums;
}

KlResult kl_divergence(Session& session, KlBaseReader& base, int32_t bos, int64_t max_chunks,
                       const std::function<void(int64_t chunk, int64_t n_chunk, const KlSums&)>& on_chunk) {
  const KlBaseHeader& h = base.header();
  const int64_t n_chunk = max_chunks > 0 ? std::min(h.n_chunk, max_chunks) : h.n_chunk;
  const int64_t n_vocab = h.n_vocab, first = h.n_ctx / 2, row = compressed_row_size(n_vocab);
  KlResult r;
  std::vector<uint16_t> rows;
  for (int64_t c = 0; c < n_chunk; ++c) {
    base.read_chunk(rows);
    const std::span<const int32_t> chunk = std::span(h.tokens).subspan(c * h.n_ctx, h.n_ctx);
    const std::vector<float> logits = chunk_logits(session, chunk, bos);
    for (int64_t i = first; i < h.n_ctx - 1; ++i) {
      const KlToken t =
          compare_with_base(std::span(logits).subspan(i * n_vocab, n_vocab),
                            std::span(rows).subspan((i - first) * row, row), chunk[static_cast<size_t>(i + 1)], r.sums);
      r.kld.push_back(static_cast<float>(t.kld));
      r.p_diff.push_back(t.p_diff);
    }
    if (on_chunk) on_chunk(c + 1, n_chunk, r.sums);
  }
  return r;
}

}  // namespace latte::eval
