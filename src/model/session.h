// An evaluation session: a model, its cache and a backend. Tokens are evaluated in order after
// the ones already cached; the cache can be cleared or truncated (e.g. to re-run a suffix).
//
//   latte::Model model("m.gguf");
//   latte::Session s(model, {.cache_type = ggl::Type::F16});
//   std::vector<float> all = s.eval(prompt);                        // [n][n_vocab]
//   std::vector<float> next = s.eval({&tok, 1}, latte::Logits::kLast);  // [n_vocab]
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ggml-like/graph/graph_backend.h"
#include "ggml-like/core/types.h"
#include "src/model/forward.h"
#include "src/model/kv_cache.h"
#include "src/model/model.h"

namespace latte {

struct SessionOptions {
  int64_t n_ctx = 0;                       // 0: default_context()
  ggl::Type cache_type = ggl::Type::F16;   // f32, f16, bf16, q8_0
  MlaMode mla_mode = MlaMode::kAuto;       // deepseek2 only
  int n_threads = 0;                       // 0: one per physical core
  int64_t n_batch = 512;                   // most tokens per graph
};

enum class Logits { kAll, kLast };

// min(4096, the model's training context).
int64_t default_context(const Hparams& hp);

class Session {
 public:
  // The model must outlive the session. Throws ggl::Error for bad options.
  explicit Session(const Model& model, SessionOptions options = {});
  ~Session();

  // Evaluates tokens at positions n_past()..; returns float logits [n_tokens][n_vocab] (kAll) or
  // [n_vocab] for the last token (kLast). Throws ggl::Error, leaving the session unchanged, for a
  // token id outside the vocabulary or when the tokens do not fit in the context.
  std::vector<float> eval(std::span<const int32_t> tokens, Logits which = Logits::kAll);

  int64_t n_past() const { return n_past_; }
  int64_t n_ctx() const { return cache_.n_ctx(); }
  int64_t n_vocab() const { return model_.hparams().n_vocab; }
  const Model& model() const { return model_; }
  const KvCache& cache() const { return cache_; }
  const SessionOptions& options() const { return options_; }
  // What runs the session's graphs (also other graphs on its cache, e.g. cache_shift.h).
  ggl::Backend& backend() { return *backend_; }
  // The MLA path the last graph used (kAbsorb or kNaive; kAbsorb for non-MLA models).
  MlaMode last_mla_path() const { return last_path_; }

  void clear() { n_past_ = 0; }
  // Forgets every token from position n on.
  void truncate(int64_t n);
  // Declares cache rows 0..n-1 valid after they were written directly (a cache loaded from a
  // file: src/model/cache_io.h). 0 <= n <= n_ctx().
  void set_n_past(int64_t n);

 private:
  const Model& model_;
  SessionOptions options_;
  KvCache cache_;
  std::unique_ptr<ggl::Backend> backend_;
  int64_t n_past_ = 0;
  MlaMode last_path_ = MlaMode::kAbsorb;
};

}  // namespace latte
