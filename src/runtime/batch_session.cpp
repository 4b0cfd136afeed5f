#include "src/runtime/batch_session.h"

#include <cstring>

#include "ggml-like/core/error.h"
#include "ggml-like/registry/backend_registry.h"

namespace latte {

BatchSession::BatchSession(const Model& model, int n_sequences, SessionOptions options)
    : model_(model), options_(resolved_options(model, std::move(options))) {
  if (n_sequences <= 0) ggl::fail("{} sequences: there must be at least one", n_sequences);
  if (options_.placement) ggl::fail("batched sequences run on the CPU only (no offload yet)");
  backend_ = ggl::make_backend({.n_threads = options_.n_threads});
  backend_->use_prepared_weights(model.prepared_weights());
  for (int s = 0; s < n_sequences; ++s)
    caches_.push_back(std::make_unique<KvCache>(model.hparams(), options_.n_ctx, options_.cache_type));
  n_past_.assign(static_cast<size_t>(n_sequences), 0);
}

BatchSession::~BatchSession() = default;

size_t BatchSession::index_of(int sequence) const {
  if (sequence < 0 || sequence >= n_sequences()) ggl::fail("no sequence {} (there are {})", sequence, n_sequences());
  return static_cast<size_t>(sequence);
}

void BatchSession::clear(int sequence) { n_past_[index_of(sequence)] = 0; }

void BatchSession::truncate(int sequence, int64_t n) {
  const size_t at = index_of(sequence);
  if (n < 0 || n > n_past_[at])
    ggl::fail("sequence {}: cannot truncate {} cached tokens to {}", sequence, n_past_[at], n);
  n_past_[at] = n;
}

void BatchSession::copy_prefix(int from, int to, int64_t n) {
  const size_t src = index_of(from), dst = index_of(to);
  if (src == dst) ggl::fail("sequence {}: cannot copy a prefix onto itself", from);
  if (n < 0 || n > n_past_[src])
    ggl::fail("sequence {} holds {} cached tokens, not the {} to copy", from, n_past_[src], n);
  const KvCache& a = *caches_[src];
  const KvCache& b = *caches_[dst];
  // The caches are host memory (no offload here) of one layout: rows are contiguous per layer and
  // stream, so the prefix of each is one block.
  for (int64_t layer = 0; layer < a.n_layer(); ++layer)
    for (int stream = 0; stream < a.layout().streams; ++stream)
      std::memcpy(b.data(layer, stream), a.data(layer, stream), static_cast<size_t>(n) * a.row_bytes(stream));
  n_past_[dst] = n;
}

std::vector<float> BatchSession::step(std::span<const SequenceTokens> parts, Logits which) {
  const int64_t n_vocab = model_.hparams().n_vocab;
  std::vector<bool> listed(caches_.size(), false);
  std::vector<SequenceBatch> batches;
  int64_t total = 0;
  const MlaSpeeds speeds = mla_speeds(model_, *backend_);
  for (const SequenceTokens& p : parts) {
    const size_t at = index_of(p.sequence);
    if (listed[at]) ggl::fail("sequence {} is listed twice in one step", p.sequence);
    listed[at] = true;
    const int64_t n = static_cast<int64_t>(p.tokens.size()), past = n_past_[at];
    if (n == 0) continue;
    check_token_ids(p.tokens, past, n_vocab, p.sequence);
    if (past + n > options_.n_ctx)
      ggl::fail("sequence {}: {} tokens after {} cached ones exceed the context of {} tokens", p.sequence, n, past,
                options_.n_ctx);
    batches.push_back(
        {caches_[at].get(), p.tokens, past, choose_mla_path(model_.hparams(), n, past, options_.mla_mode, speeds)});
    total += n;
  }
  if (total == 0) return {};

  ggl::Graph graph;
  graph.set_batch_invariant(options_.deterministic);
  ggl::Tensor* out = build_forward_sequences(graph, model_, batches, which == Logits::kAll);
  backend_->compute(graph);
  const int64_t rows = which == Logits::kAll ? total : static_cast<int64_t>(batches.size());
  std::vector<float> logits(static_cast<size_t>(rows * n_vocab));
  backend_->read(*out, logits.data(), 0, logits.size() * sizeof(float));

  last_paths_.clear();
  for (const SequenceTokens& p : parts)
    n_past_[static_cast<size_t>(p.sequence)] += static_cast<int64_t>(p.tokens.size());
  for (const SequenceBatch& b : batches) last_paths_.push_back(b.mla_path);
  return logits;
}

}  // namespace latte
