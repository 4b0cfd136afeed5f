#include "src/bench/mixed_load.h"

#include <algorithm>
#include <random>
#include <span>

#include "ggml-like/core/error.h"
#include "src/runtime/batch_session.h"
#include "src/runtime/stopwatch.h"

namespace latte::bench {
namespace {

std::vector<int64_t> spread_decoders() {
  std::vector<int64_t> out;
  for (int i = 0; i < 16; ++i) out.push_back(50 + i * 350 / 15);
  return out;
}

// Evaluates `n` random tokens of `sequence` in steps of at most n_batch, untimed.
void fill_cache(BatchSession& b, int sequence, int64_t n, int64_t n_batch, std::mt19937& rng, int32_t n_vocab) {
  std::uniform_int_distribution<int32_t> token(0, n_vocab - 1);
  for (int64_t done = 0; done < n;) {
    std::vector<int32_t> chunk(static_cast<size_t>(std::min(n_batch, n - done)));
    std::generate(chunk.begin(), chunk.end(), [&] { return token(rng); });
    b.step(std::vector<SequenceTokens>{{sequence, chunk}}, Logits::kLast);
    done += static_cast<int64_t>(chunk.size());
  }
}

}  // namespace

MixedLoadResult run_mixed_load(const Model& model, const MixedLoadOptions& o) {
  MixedLoadResult r;
  r.prompts = o.prompts;
  r.decoder_cached = o.decoder_cached.empty() ? spread_decoders() : o.decoder_cached;
  const auto n_decoders = static_cast<int64_t>(r.decoder_cached.size());
  if (o.prompts.empty()) ggl::fail("mixed load: no prompts");
  if (o.n_batch <= n_decoders)
    ggl::fail("-b {} leaves no room for a prompt chunk beside {} decoding sequences", o.n_batch, n_decoders);
  const auto n_vocab = static_cast<int32_t>(model.hparams().n_vocab);
  std::mt19937 rng(4321);
  std::uniform_int_distribution<int32_t> token(0, n_vocab - 1);

  // Steps until every prompt is read: the context each sequence needs (its decode steps twice).
  int64_t fresh = 0, longest = 0;
  for (const PromptRequest& p : o.prompts) {
    if (p.cached < 0 || p.fresh < 1) ggl::fail("mixed load: a prompt needs new tokens");
    fresh += p.fresh;
    longest = std::max(longest, p.cached + p.fresh);
  }
  const int64_t max_steps = fresh / (o.n_batch - n_decoders) + static_cast<int64_t>(o.prompts.size()) + 1;
  for (int64_t c : r.decoder_cached) longest = std::max(longest, c + 2 * max_steps);
  SessionOptions so = o.session;
  so.n_ctx = longest;
  const auto n_prompts = static_cast<int>(o.prompts.size());
  BatchSession b(model, static_cast<int>(n_decoders) + n_prompts, so);
  for (int i = 0; i < n_decoders; ++i)
    fill_cache(b, i, r.decoder_cached[static_cast<size_t>(i)], o.n_batch, rng, n_vocab);
  for (int p = 0; p < n_prompts; ++p)
    fill_cache(b, static_cast<int>(n_decoders) + p, o.prompts[static_cast<size_t>(p)].cached, o.n_batch, rng, n_vocab);

  std::vector<std::vector<int32_t>> prompts;
  for (const PromptRequest& p : o.prompts) {
    prompts.emplace_back(static_cast<size_t>(p.fresh));
    std::generate(prompts.back().begin(), prompts.back().end(), [&] { return token(rng); });
  }
  std::vector<int32_t> next(static_cast<size_t>(n_decoders));
  auto decode_parts = [&] {
    std::vector<SequenceTokens> parts;
    for (int64_t i = 0; i < n_decoders; ++i) {
      next[static_cast<size_t>(i)] = token(rng);
      parts.push_back({static_cast<int>(i), {&next[static_cast<size_t>(i)], 1}});
    }
    return parts;
  };

  std::vector<size_t> read(prompts.size(), 0);
  const Stopwatch mixed;
  while (std::any_of(r.prompts.begin(), r.prompts.end(), [](const PromptRequest& p) { return p.ttft == 0; })) {
    std::vector<SequenceTokens> parts = decode_parts();
    int64_t budget = o.n_batch - n_decoders;
    for (size_t p = 0; p < prompts.size() && budget > 0; ++p) {
      const size_t n = std::min(prompts[p].size() - read[p], static_cast<size_t>(budget));
      if (n == 0) continue;
      parts.push_back({static_cast<int>(n_decoders) + static_cast<int>(p),
                       std::span<const int32_t>(prompts[p]).subspan(read[p], n)});
      read[p] += n;
      budget -= static_cast<int64_t>(n);
    }
    b.step(parts, Logits::kLast);
    ++r.steps;
    for (size_t p = 0; p < prompts.size(); ++p)
      if (read[p] == prompts[p].size() && r.prompts[p].ttft == 0) r.prompts[p].ttft = mixed.seconds();
  }
  r.t_mixed = mixed.seconds();

  const Stopwatch alone;
  for (int64_t s = 0; s < r.steps; ++s) b.step(decode_parts(), Logits::kLast);
  r.t_alone = alone.seconds();
  return r;
}

}  // namespace latte::bench
