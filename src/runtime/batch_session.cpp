#include "src/runtime/batch_session.h"

#include <algorithm>
#include <cstring>

#include "ggml-like/core/error.h"
#include "ggml-like/registry/backend_registry.h"

namespace latte {

BatchSession::BatchSession(const Model& model, int n_sequences, SessionOptions options, CachePoolOptions pool)
    : model_(model), options_(resolved_options(model, std::move(options))) {
  if (n_sequences <= 0) ggl::fail("{} sequences: there must be at least one", n_sequences);
  if (pool.tokens < 0) ggl::fail("a cache pool of {} tokens: the size must be positive", pool.tokens);
  if (std::optional<OffloadBackend> o = make_offload_backend(model, options_)) {
    backend_ = std::move(o->backend);
    device_ = o->device;
    device_weights_ = std::move(o->weights);
    offload_ = std::move(o->plan);
  } else {
    backend_ = ggl::make_backend({.n_threads = options_.n_threads});
  }
  backend_->use_prepared_weights(model.prepared_weights());
  backend_->use_paged_weights(model.expert_pager());             // routed experts beyond the memory budget
  backend_->use_expert_exchange(model.expert_share().exchange);  // the other ranks' experts (mpirun)
  if (options_.data_parallel && (model.expert_share().ranks < 2 || !model.expert_share().exchange ||
                                 model.hparams().arch != Arch::kDeepseek2 || model.hparams().moe.n_expert == 0))
    ggl::fail(
        "data-parallel attention needs a model with routed experts (deepseek2) shared by the ranks of an MPI job");
  if (options_.data_parallel && offload_) ggl::fail("data-parallel attention runs on the CPU: drop -ngl / -ot");
  const int64_t tokens = pool.tokens > 0 ? pool.tokens : options_.n_ctx * n_sequences;
  const int64_t page_tokens = pool.page_tokens > 0
                                  ? pool.page_tokens
                                  : CachePagePool::page_tokens_for(model.hparams(), options_.cache_type, tokens);
  // Without a size, every sequence can fill its context at once: whole pages each.
  const int64_t whole =
      pool.tokens > 0 ? tokens : (options_.n_ctx + page_tokens - 1) / page_tokens * page_tokens * n_sequences;
  pool_ = std::make_unique<CachePagePool>(model.hparams(), options_.cache_type, whole, page_tokens);
  pages_ = std::make_unique<PrefixPages>(pool_->n_pages(), pool_->page_tokens());
  sequences_.resize(static_cast<size_t>(n_sequences));
  for (Sequence& s : sequences_) s.cache = std::make_unique<KvCache>(*pool_, options_.n_ctx);
}

BatchSession::~BatchSession() = default;

size_t BatchSession::index_of(int sequence) const {
  if (sequence < 0 || sequence >= n_sequences()) ggl::fail("no sequence {} (there are {})", sequence, n_sequences());
  return static_cast<size_t>(sequence);
}

std::optional<int64_t> BatchSession::take_page(const Sequence* keep_a, const Sequence* keep_b) {
  for (;;) {
    if (const std::optional<int64_t> page = pages_->allocate()) return page;
    Sequence* victim = nullptr;
    for (Sequence& s : sequences_)
      if (s.evictable && !s.pages.empty() && &s != keep_a && &s != keep_b &&
          (!victim || s.evictable_since < victim->evictable_since))
        victim = &s;
    if (!victim) return std::nullopt;
    // Its published pages become cached (the next allocate() may evict them, its last first).
    victim->tokens.clear();
    drop_pages(*victim, 0);
  }
}

void BatchSession::append_page(Sequence& s, int64_t page) {
  const auto slot = static_cast<int64_t>(s.pages.size());
  try {
    s.cache->map_page(slot, page);
  } catch (const ggl::Error&) {
    // The system refused a mapping (vm.max_map_count): the slot goes back to unmapped, the page
    // back to the pool.
    try {
      s.cache->unmap_page(slot);
    } catch (const ggl::Error&) {}
    pages_->release(page);
    throw;
  }
  s.pages.push_back(page);
}

size_t BatchSession::map_shared(Sequence& s, std::span<const int64_t> pages) {
  size_t mapped = 0;
  for (int64_t page : pages) {
    pages_->retain(page);
    try {
      append_page(s, page);
    } catch (const ggl::Error&) {
      break;  // no more mappings: a shorter prefix
    }
    ++mapped;
  }
  pages_reused_ += mapped;
  return mapped;
}

void BatchSession::drop_pages(Sequence& s, size_t first) {
  // The last first: a subtree's leaves join the eviction line before their parents.
  while (s.pages.size() > first) {
    s.cache->unmap_page(static_cast<int64_t>(s.pages.size() - 1));
    pages_->release(s.pages.back());
    s.pages.pop_back();
  }
  s.published = std::min(s.published, static_cast<int64_t>(s.pages.size()));
}

void BatchSession::publish_pages(Sequence& s) {
  const size_t full = s.tokens.size() / page_tokens();
  for (auto k = static_cast<size_t>(s.published); k < full; ++k, ++s.published) {
    const int64_t page = s.pages[k];
    const int64_t parent = k == 0 ? -1 : s.pages[k - 1];
    const int64_t canonical =
        pages_->publish(page, parent, std::span(s.tokens).subspan(k * page_tokens(), page_tokens()));
    // The same tokens after the same parent were published first by another sequence: this one
    // keeps its own copy (remapping it could leave a slot half on a page it holds no reference
    // to, should the system refuse a mapping) and publishes no further, since a published page's
    // parent must be published.
    if (canonical != page) return;
  }
}

int64_t BatchSession::reserve(int sequence, int64_t n) {
  Sequence& s = sequence_at(sequence);
  const int64_t past = static_cast<int64_t>(s.tokens.size());
  const auto slots =
      static_cast<size_t>((std::min(past + n, s.cache->n_ctx()) + pool_->page_tokens() - 1) / pool_->page_tokens());
  while (s.pages.size() < slots) {
    const std::optional<int64_t> page = take_page(&s);
    if (!page) break;
    try {
      append_page(s, *page);
    } catch (const ggl::Error&) {
      break;  // no more mappings: as good as no more pages
    }
  }
  return std::clamp(static_cast<int64_t>(s.pages.size()) * pool_->page_tokens() - past, int64_t{0}, n);
}

void BatchSession::set_evictable(int sequence, bool evictable) {
  Sequence& s = sequence_at(sequence);
  if (evictable && !s.evictable) s.evictable_since = ++clock_;
  s.evictable = evictable;
}

void BatchSession::clear(int sequence) {
  Sequence& s = sequence_at(sequence);
  s.tokens.clear();
  drop_pages(s, 0);
}

void BatchSession::truncate(int sequence, int64_t n) {
  Sequence& s = sequence_at(sequence);
  const int64_t past = static_cast<int64_t>(s.tokens.size());
  if (n < 0 || n > past) ggl::fail("sequence {}: cannot truncate {} cached tokens to {}", sequence, past, n);
  const size_t keep = (static_cast<size_t>(n) + page_tokens() - 1) / page_tokens();
  drop_pages(s, keep);
  s.tokens.resize(static_cast<size_t>(n));
  const size_t rows = static_cast<size_t>(n) % page_tokens();
  if (rows == 0) return;
  // The last page kept is written past row `rows` from now on: another sequence's rows, or a
  // published prefix, must not change, so the sequence gets its own copy of what it keeps.
  const int64_t last = s.pages.back();
  if (pages_->refs(last) == 1 && !pages_->published(last)) return;
  const std::optional<int64_t> copy = take_page(&s);
  if (!copy) {
    s.tokens.resize(s.tokens.size() - rows);
    drop_pages(s, keep - 1);
    return;
  }
  const auto slot = static_cast<int64_t>(keep - 1), first = slot * pool_->page_tokens();
  std::vector<uint8_t> buffer;
  for (int64_t layer = 0; layer < s.cache->n_layer(); ++layer)
    for (int stream = 0; stream < s.cache->layout().streams; ++stream) {
      buffer.resize(rows * s.cache->row_bytes(stream));
      s.cache->read_rows(layer, stream, first, static_cast<int64_t>(rows), buffer.data());
      pool_->map(*copy, layer, stream,
                 s.cache->data(layer, stream) + static_cast<size_t>(first) * s.cache->row_bytes(stream));
      s.cache->write_rows(layer, stream, first, static_cast<int64_t>(rows), buffer.data());
    }
  s.pages.back() = *copy;
  pages_->release(last);
  s.published = std::min(s.published, slot);
}

void BatchSession::copy_prefix(int from, int to, int64_t n) {
  Sequence& src = sequence_at(from);
  Sequence& dst = sequence_at(to);
  if (&src == &dst) ggl::fail("sequence {}: cannot copy a prefix onto itself", from);
  if (n < 0 || n > static_cast<int64_t>(src.tokens.size()))
    ggl::fail("sequence {} holds {} cached tokens, not the {} to copy", from, src.tokens.size(), n);
  clear(to);
  const size_t whole = static_cast<size_t>(n) / page_tokens();
  const size_t mapped = map_shared(dst, std::span(src.pages).first(whole));
  dst.tokens.assign(src.tokens.begin(), src.tokens.begin() + static_cast<std::ptrdiff_t>(mapped * page_tokens()));
  dst.published = static_cast<int64_t>(std::min(mapped, static_cast<size_t>(src.published)));
  const size_t rows = static_cast<size_t>(n) % page_tokens();
  if (mapped < whole || rows == 0) return;
  const std::optional<int64_t> page = take_page(&src, &dst);
  if (!page) return;
  try {
    append_page(dst, *page);
  } catch (const ggl::Error&) {
    return;  // the whole pages only
  }
  const size_t first = whole * page_tokens();
  // Both windows are host memory of one layout: each layer's and stream's rows are one block.
  for (int64_t layer = 0; layer < src.cache->n_layer(); ++layer)
    for (int stream = 0; stream < src.cache->layout().streams; ++stream) {
      const size_t row = src.cache->row_bytes(stream);
      std::memcpy(dst.cache->data(layer, stream) + first * row, src.cache->data(layer, stream) + first * row,
                  rows * row);
    }
  dst.tokens.insert(dst.tokens.end(), src.tokens.begin() + static_cast<std::ptrdiff_t>(first),
                    src.tokens.begin() + static_cast<std::ptrdiff_t>(first + rows));
}

int64_t BatchSession::reuse_prefix(int sequence, std::span<const int32_t> tokens) {
  Sequence& s = sequence_at(sequence);
  const size_t own = static_cast<size_t>(
      std::mismatch(s.tokens.begin(), s.tokens.end(), tokens.begin(), tokens.end()).first - s.tokens.begin());
  std::vector<int64_t> found = pages_->lookup(tokens);
  found.resize(std::min(found.size(), static_cast<size_t>(s.cache->n_ctx()) / page_tokens()));
  if (found.size() * page_tokens() <= own) {
    truncate(sequence, static_cast<int64_t>(own));
    return n_past(sequence);
  }
  // Some of the pages found may be the sequence's own: cleared, they wait as cached pages (only
  // taking a page evicts one) and are mapped again.
  clear(sequence);
  const size_t mapped = map_shared(s, found);
  s.tokens.assign(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(mapped * page_tokens()));
  s.published = static_cast<int64_t>(mapped);
  return n_past(sequence);
}

CachePoolStats BatchSession::pool_stats() const {
  return {.page_tokens = pool_->page_tokens(),
          .pages = pages_->n_pages(),
          .pages_used = pages_->n_used(),
          .pages_cached = pages_->n_cached(),
          .pages_free = pages_->n_free(),
          .pages_reused = pages_reused_};
}

std::vector<SequenceBatch> BatchSession::prepare_step(std::span<const SequenceTokens> parts) {
  const int64_t n_vocab = model_.hparams().n_vocab;
  std::vector<bool> listed(sequences_.size(), false);
  for (const SequenceTokens& p : parts) {
    const size_t at = index_of(p.sequence);
    if (listed[at]) ggl::fail("sequence {} is listed twice in one step", p.sequence);
    listed[at] = true;
    const int64_t n = static_cast<int64_t>(p.tokens.size()), past = n_past(p.sequence);
    check_token_ids(p.tokens, past, n_vocab, p.sequence);
    if (past + n > options_.n_ctx)
      ggl::fail("sequence {}: {} tokens after {} cached ones exceed the context of {} tokens", p.sequence, n, past,
                options_.n_ctx);
  }
  for (const SequenceTokens& p : parts) sequence_at(p.sequence).evictable = false;
  for (const SequenceTokens& p : parts) {
    const auto n = static_cast<int64_t>(p.tokens.size());
    if (reserve(p.sequence, n) < n) {
      // Pages reserved for this step stay with their sequences, for the next try.
      const CachePoolStats st = pool_stats();
      ggl::fail(
          "the cache pool is full: sequence {} needs pages for {} more tokens and all {} pages of {} tokens are "
          "in use",
          p.sequence, n, st.pages, st.page_tokens);
    }
  }

  std::vector<SequenceBatch> batches;
  const MlaSpeeds speeds = mla_speeds(model_, *backend_);
  for (const SequenceTokens& p : parts) {
    const int64_t n = static_cast<int64_t>(p.tokens.size()), past = n_past(p.sequence);
    if (n == 0) continue;
    batches.push_back({sequence_at(p.sequence).cache.get(), p.tokens, past,
                       choose_mla_path(model_.hparams(), n, past, options_.mla_mode, speeds)});
  }
  return batches;
}

GatheredTokens BatchSession::meet_other_ranks(int64_t tokens) const {
  const ExpertShare& share = model_.expert_share();
  const std::vector<int64_t> counts = share.exchange->token_counts(tokens);
  if (counts.size() != static_cast<size_t>(share.ranks) || counts[static_cast<size_t>(share.rank)] != tokens)
    ggl::fail("rank {}: the ranks' token counts do not match the job", share.rank);
  GatheredTokens at;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (static_cast<int>(r) < share.rank) at.first += counts[r];
    at.total += counts[r];
  }
  return at;
}

std::vector<float> BatchSession::step(std::span<const SequenceTokens> parts, Logits which) {
  const int64_t n_vocab = model_.hparams().n_vocab;
  std::vector<SequenceBatch> batches;
  try {
    batches = prepare_step(parts);
  } catch (const ggl::Error&) {
    // The other ranks still meet this one at every MoE layer of the step: it serves its experts.
    if (options_.data_parallel) step({}, which);
    throw;
  }
  int64_t total = 0;
  for (const SequenceBatch& b : batches) total += static_cast<int64_t>(b.tokens.size());
  std::optional<GatheredTokens> gathered;
  if (options_.data_parallel) {
    gathered = meet_other_ranks(total);
    if (gathered->total > 0 && total == 0) {  // none of this rank's own: its experts serve the others
      ggl::Graph graph;
      graph.set_batch_invariant(options_.deterministic);
      build_expert_service(graph, model_, *gathered);
      backend_->compute(graph);
    }
  }
  if (total == 0) return {};

  ggl::Graph graph;
  graph.set_batch_invariant(options_.deterministic);
  ggl::Tensor* out =
      build_forward_sequences(graph, model_, batches, which == Logits::kAll,
                              device_weights_ ? &device_weights_->weights() : nullptr, gathered ? &*gathered : nullptr);
  backend_->compute(graph);
  const int64_t rows = which == Logits::kAll ? total : static_cast<int64_t>(batches.size());
  std::vector<float> logits(static_cast<size_t>(rows * n_vocab));
  backend_->read(*out, logits.data(), 0, logits.size() * sizeof(float));

  last_paths_.clear();
  for (const SequenceTokens& p : parts) {
    Sequence& s = sequence_at(p.sequence);
    s.tokens.insert(s.tokens.end(), p.tokens.begin(), p.tokens.end());
    publish_pages(s);
  }
  for (const SequenceBatch& b : batches) last_paths_.push_back(b.mla_path);
  return logits;
}

}  // namespace latte
