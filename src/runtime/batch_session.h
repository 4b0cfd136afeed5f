// Several sequences of one model evaluated together, each with its own cache: one graph per step
// carries the next tokens of every sequence that has some (decode steps beside prompt chunks), so
// every weight matrix and expert is read once per step for all of them.
//
//   latte::BatchSession b(model, 4, {.n_ctx = 2048});
//   std::vector<float> logits = b.step({{0, prompt}, {1, {&next, 1}}});  // [tokens][n_vocab]
//
// With a placement (SessionOptions::placement, as Session takes it) the placed weights go to the
// device and the graphs run through a Scheduler over [device, CPU]; the caches stay in the host's
// pool, so attention runs on the CPU. The caches of all sequences are one pool of pages
// (src/model/page_pool.h): a sequence takes a page when its tokens reach one and gives its pages
// back when cleared, so the pool can hold fewer tokens than sequences times n_ctx. Full pages are
// published under their token prefix (src/runtime/prefix_pages.h): a sequence whose tokens start
// as another's did maps those pages instead of computing them (reuse_prefix), and pages no
// sequence maps stay cached until the pool needs them.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "ggml-like/backend/backend.h"
#include "src/model/forward.h"
#include "src/model/kv_cache.h"
#include "src/model/model.h"
#include "src/model/page_pool.h"
#include "src/runtime/prefix_pages.h"
#include "src/runtime/session.h"

namespace latte {

// A sequence's tokens in a step.
struct SequenceTokens {
  int sequence = 0;
  std::span<const int32_t> tokens;
};

// The shared cache pool.
struct CachePoolOptions {
  int64_t tokens = 0;       // the pool's size in tokens; 0: n_ctx for every sequence
  int64_t page_tokens = 0;  // tokens per page; 0: chosen by the pool (CachePagePool::page_tokens_for)
};

struct CachePoolStats {
  int64_t page_tokens = 0;
  int64_t pages = 0;         // in the pool
  int64_t pages_used = 0;    // mapped by a sequence
  int64_t pages_cached = 0;  // published and mapped by none: reusable until evicted
  int64_t pages_free = 0;
  uint64_t pages_reused = 0;  // mapped from another sequence's rows instead of computed, so far
};

class BatchSession {
 public:
  // n_sequences sequences of up to options.n_ctx tokens each (0: default_context()) over one cache
  // pool. The model must outlive the session. Throws ggl::Error for bad options.
  BatchSession(const Model& model, int n_sequences, SessionOptions options = {}, CachePoolOptions pool = {});
  ~BatchSession();

  // Evaluates each listed sequence's tokens after its cached ones, all in one graph; returns the
  // logits of every token [total tokens][n_vocab] (kAll) or of each listed sequence's last token
  // [sequences with tokens][n_vocab] (kLast), in the order listed. Throws ggl::Error, leaving
  // every sequence unchanged, for an unknown or repeated sequence, a token outside the vocabulary,
  // or tokens that do not fit in a sequence's context, and when the pool has no page left for them
  // ("the cache pool is full"; reserve() first to know). A listed sequence stops being evictable.
  // Data-parallel (SessionOptions::data_parallel): a step meets the other ranks' steps, also one
  // without tokens, and one that fails so (the others go on without this rank's tokens).
  std::vector<float> step(std::span<const SequenceTokens> parts, Logits which = Logits::kAll);

  int n_sequences() const { return static_cast<int>(sequences_.size()); }
  int64_t n_past(int sequence) const { return static_cast<int64_t>(sequence_at(sequence).tokens.size()); }
  // The tokens whose rows a sequence holds (n_past of them).
  std::span<const int32_t> cached_tokens(int sequence) const { return sequence_at(sequence).tokens; }
  int64_t n_ctx() const { return options_.n_ctx; }
  // Forgets a sequence's cached tokens; its published pages stay cached for others.
  void clear(int sequence);
  // Keeps a sequence's first n cached tokens and forgets the rest, so a new prompt that shares
  // them evaluates only what follows. A page it shares keeps its rows: the sequence gets a copy of
  // the part it keeps (copy on write), or, when the pool has no page for that, keeps only its
  // whole pages below n (see n_past). Throws ggl::Error unless 0 <= n <= n_past.
  void truncate(int sequence, int64_t n);
  // Makes sequence `to` hold the first n cached tokens of sequence `from` (whatever `to` held is
  // forgotten): the whole pages are shared, the rest copied, so a prefix another sequence already
  // evaluated costs a copy at most instead of a forward pass. Without a page for the rest, `to`
  // holds only the whole pages (see n_past). Throws ggl::Error unless 0 <= n <= n_past(from) and
  // the sequences differ.
  void copy_prefix(int from, int to, int64_t n);
  // Makes the sequence hold the longest prefix of `tokens` the cache has: its own rows as far as
  // they agree with `tokens`, or the published pages of earlier sequences when they go further
  // (what it held past them is forgotten). Returns n_past.
  int64_t reuse_prefix(int sequence, std::span<const int32_t> tokens);
  // Gives the sequence pages for its next n tokens, evicting cached pages and the rows of evictable
  // sequences as needed; returns how many of the n have pages (n unless the pool ran out). Pages
  // beyond the sequence's tokens are kept for its next step. (A mapping the system refuses,
  // past vm.max_map_count, counts as no page.)
  int64_t reserve(int sequence, int64_t n);
  // An evictable sequence (an idle slot's) loses its rows, as by clear(), when another sequence
  // needs a page and none is free or cached; the least recently marked goes first.
  void set_evictable(int sequence, bool evictable);
  CachePoolStats pool_stats() const;
  // The placement in use, when a device holds anything (nullptr: everything on the CPU).
  const OffloadPlan* offload() const { return offload_ ? &*offload_ : nullptr; }
  // The device backend the session offloads to (nullptr: none).
  const ggl::Backend* device() const { return device_; }
  // The MLA path each part of the last step took, in the order listed (kAbsorb for non-MLA models).
  const std::vector<MlaMode>& last_mla_paths() const { return last_paths_; }

 private:
  struct Sequence {
    std::unique_ptr<KvCache> cache;  // the paged form: windows over the pool
    std::vector<int64_t> pages;      // the pool page at each slot, in token order
    std::vector<int32_t> tokens;     // whose rows it holds
    int64_t published = 0;           // leading pages published (prefix_pages.h)
    bool evictable = false;
    uint64_t evictable_since = 0;
  };

  // The sequence's index; throws ggl::Error for one that does not exist.
  size_t index_of(int sequence) const;
  Sequence& sequence_at(int sequence) { return sequences_[index_of(sequence)]; }
  const Sequence& sequence_at(int sequence) const { return sequences_[index_of(sequence)]; }
  // A page from the pool, evicting cached pages, then evictable sequences other than `keep`, as
  // needed; nullopt when there is none.
  std::optional<int64_t> take_page(const Sequence* keep_a, const Sequence* keep_b = nullptr);
  // Maps `page` (taken or retained for s) at s's next slot; throws ggl::Error, the page released,
  // when the system refuses the mapping.
  void append_page(Sequence& s, int64_t page);
  // Maps other sequences' published or shared pages at s's next slots, as many as the system
  // maps; returns how many.
  size_t map_shared(Sequence& s, std::span<const int64_t> pages);
  // Gives back the sequence's pages from slot `first` on.
  void drop_pages(Sequence& s, size_t first);
  // Publishes the sequence's full pages not yet published, up to one that duplicates a page
  // published earlier.
  void publish_pages(Sequence& s);
  size_t page_tokens() const { return static_cast<size_t>(pool_->page_tokens()); }
  // The step's checks and pages; returns each part's batch.
  std::vector<SequenceBatch> prepare_step(std::span<const SequenceTokens> parts);
  // Data-parallel: where this rank's `tokens` lie among every rank's of the step (met here).
  GatheredTokens meet_other_ranks(int64_t tokens) const;

  const Model& model_;
  SessionOptions options_;
  // Declared before what is allocated in the device's memory, so it is destroyed after it.
  std::unique_ptr<ggl::Backend> backend_;
  ggl::Backend* device_ = nullptr;                 // owned by backend_ (a Scheduler) when offloading
  std::unique_ptr<DeviceWeights> device_weights_;  // with a placement: the device's weights
  std::optional<OffloadPlan> offload_;
  std::unique_ptr<CachePagePool> pool_;
  std::unique_ptr<PrefixPages> pages_;
  std::vector<Sequence> sequences_;
  uint64_t clock_ = 0;  // orders set_evictable calls
  uint64_t pages_reused_ = 0;
  std::vector<MlaMode> last_paths_;
};

}  // namespace latte
