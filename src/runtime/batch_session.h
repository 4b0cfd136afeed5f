// Several sequences of one model evaluated together, each with its own cache: one graph per step
// carries the next tokens of every sequence that has some (decode steps beside prompt chunks), so
// every weight matrix and expert is read once per step for all of them.
//
//   latte::BatchSession b(model, 4, {.n_ctx = 2048});
//   std::vector<float> logits = b.step({{0, prompt}, {1, {&next, 1}}});  // [tokens][n_vocab]
//
// The CPU runs the graphs (no offload yet). Each sequence's cache is a contiguous reservation of
// n_ctx rows, touched page by page as it fills.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ggml-like/backend/backend.h"
#include "src/model/forward.h"
#include "src/model/kv_cache.h"
#include "src/model/model.h"
#include "src/runtime/session.h"

namespace latte {

// A sequence's tokens in a step.
struct SequenceTokens {
  int sequence = 0;
  std::span<const int32_t> tokens;
};

class BatchSession {
 public:
  // n_sequences caches of options.n_ctx rows each (0: default_context()); options.placement must be
  // unset. The model must outlive the session. Throws ggl::Error for bad options.
  BatchSession(const Model& model, int n_sequences, SessionOptions options = {});
  ~BatchSession();

  // Evaluates each listed sequence's tokens after its cached ones, all in one graph; returns the
  // logits of every token [total tokens][n_vocab] (kAll) or of each listed sequence's last token
  // [sequences with tokens][n_vocab] (kLast), in the order listed. Throws ggl::Error, leaving
  // every sequence unchanged, for an unknown or repeated sequence, a token outside the vocabulary,
  // or tokens that do not fit in a sequence's context.
  std::vector<float> step(std::span<const SequenceTokens> parts, Logits which = Logits::kAll);

  int n_sequences() const { return static_cast<int>(caches_.size()); }
  int64_t n_past(int sequence) const { return n_past_[index_of(sequence)]; }
  int64_t n_ctx() const { return options_.n_ctx; }
  // Forgets a sequence's cached tokens.
  void clear(int sequence);
  // Keeps a sequence's first n cached tokens and forgets the rest (as Session::truncate: the rows
  // past n are simply overwritten later), so a new prompt that shares them evaluates only what
  // follows. Throws ggl::Error unless 0 <= n <= n_past.
  void truncate(int sequence, int64_t n);
  // Makes sequence `to` hold the first n cached tokens of sequence `from` (every layer's and
  // stream's first n rows copied; whatever `to` held is forgotten): a prefix another sequence
  // already evaluated costs a copy instead of a forward pass. Throws ggl::Error unless
  // 0 <= n <= n_past(from) and the sequences differ.
  void copy_prefix(int from, int to, int64_t n);
  // The MLA path each part of the last step took, in the order listed (kAbsorb for non-MLA models).
  const std::vector<MlaMode>& last_mla_paths() const { return last_paths_; }

 private:
  // The sequence's index; throws ggl::Error for one that does not exist.
  size_t index_of(int sequence) const;

  const Model& model_;
  SessionOptions options_;
  std::unique_ptr<ggl::Backend> backend_;
  std::vector<std::unique_ptr<KvCache>> caches_;
  std::vector<int64_t> n_past_;
  std::vector<MlaMode> last_paths_;
};

}  // namespace latte
