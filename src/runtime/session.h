// An evaluation session: a model, its cache and a backend. Tokens are evaluated in order after
// the ones already cached; the cache can be cleared or truncated (e.g. to re-run a suffix).
//
//   latte::Model model("m.gguf");
//   latte::Session s(model, {.cache_type = ggl::Type::F16});
//   std::vector<float> all = s.eval(prompt);                        // [n][n_vocab]
//   std::vector<float> next = s.eval({&tok, 1}, latte::Logits::kLast);  // [n_vocab]
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <span>
#include <vector>

#include "ggml-like/backend/backend.h"
#include "ggml-like/core/types.h"
#include "src/model/forward.h"
#include "src/model/kv_cache.h"
#include "src/model/model.h"
#include "src/runtime/offload.h"
#include "src/placement/placement.h"

namespace latte {

struct SessionOptions {
  int64_t n_ctx = 0;                      // 0: default_context()
  ggl::Type cache_type = ggl::Type::F16;  // f32, f16, bf16, q8_0
  MlaMode mla_mode = MlaMode::kAuto;      // deepseek2 only
  int n_threads = 0;                      // 0: one per physical core
  int64_t n_batch = 512;                  // most tokens per graph
  // --deterministic: every graph batch-invariant (graph.h) and MLA always absorbed, so a sequence's
  // logits are bit-identical whatever else shares its graphs, however its prompt is chunked and
  // however many threads run it (docs/batching.md). CPU only.
  bool deterministic = false;
  // Data parallelism across the ranks of an MPI job (--dp-attention, docs/scale-out.md): a
  // BatchSession's sequences are this rank's own, with their caches and attention, and every step
  // meets the other ranks' steps at each MoE layer, where the experts take every rank's tokens. So
  // each rank calls BatchSession::step() as often as the others do, with no tokens when it has
  // none. BatchSession only, on a model whose routed experts are shared across ranks.
  bool data_parallel = false;
  // GPU offload (docs/offload.md). nullopt: no device is asked for and everything runs on the CPU.
  // With a request and a device backend, the placed weights are uploaded to the device, the
  // placed layers' caches live there, and graphs run through a Scheduler over [device, CPU]. With
  // a request but no device, everything runs on the CPU (the caller says so).
  std::optional<PlacementRequest> placement{};
  bool op_offload = true;             // long prompts' expert products on the device (--no-op-offload)
  int64_t op_offload_min_batch = 32;  // tokens per expert from which that pays (scheduler.h)
  // Where the device backends come from; unset: the GPUs of this build and machine
  // (ggl::available_backends). The first one is used. Tests inject a simulated device here.
  std::function<std::vector<std::unique_ptr<ggl::Backend>>()> devices{};
  // Looking inside the forward pass (tests, debugging): called with each graph once it is built,
  // to mark the tensors to read as outputs (ggl::Graph::mark_output; graph_blocks.h names some),
  // and after it ran, to read them through the backend. Unset: nothing is called.
  std::function<void(ggl::Graph&)> on_graph_built{};
  std::function<void(const ggl::Graph&, ggl::Backend&)> on_graph_run{};
};

// What the last evaluated graph moved between backends (zero without offload).
struct OffloadTraffic {
  size_t crossing_bytes = 0;  // activations crossing placement boundaries
  size_t expert_bytes = 0;    // expert weights copied to the device (op offload)
  int64_t tokens = 0;         // tokens of that graph
};

enum class Logits { kAll, kLast };

// A placement's backends: a Scheduler over [device, CPU] that owns the device, and the placed
// weights uploaded there.
struct OffloadBackend {
  std::unique_ptr<ggl::Backend> backend;
  ggl::Backend* device = nullptr;  // owned by backend
  std::unique_ptr<DeviceWeights> weights;
  OffloadPlan plan;
};
// The backends for options.placement on the first device (options.devices, else this build's
// GPUs); nullopt when no placement is asked for, no device is found, or the plan puts nothing there.
std::optional<OffloadBackend> make_offload_backend(const Model& model, const SessionOptions& options);

// min(4096, the model's training context).
int64_t default_context(const Hparams& hp);
// The options with n_ctx resolved (0: default_context()); throws ggl::Error for a negative context
// or thread count or a non-positive batch.
SessionOptions resolved_options(const Model& model, SessionOptions options);
// Throws ggl::Error naming the first token id outside [0, n_vocab) and its position (tokens[0]
// is at first_position), and the sequence when one is given (>= 0).
void check_token_ids(std::span<const int32_t> tokens, int64_t first_position, int64_t n_vocab, int sequence = -1);

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
  int64_t n_ctx() const { return cache_->n_ctx(); }
  int64_t n_vocab() const { return model_.hparams().n_vocab; }
  const Model& model() const { return model_; }
  const KvCache& cache() const { return *cache_; }
  // The weights the session's graphs are built from: the model's, with offloaded entries on the
  // device (the CPU reads its rewritten copies in place of some of the others: Model::prepared_weights).
  const ModelWeights& weights() const { return weights_ ? weights_->weights() : model_.weights(); }
  // The placement in use, when a device holds anything (nullptr: everything on the CPU).
  const OffloadPlan* offload() const { return offload_ ? &*offload_ : nullptr; }
  // The device backend the session offloads to (nullptr: none).
  const ggl::Backend* device() const { return device_; }
  const OffloadTraffic& last_traffic() const { return traffic_; }
  const SessionOptions& options() const { return options_; }
  // What runs the session's graphs (also other graphs on its cache, e.g. cache_shift.h).
  ggl::Backend& backend() { return *backend_; }
  // The MLA path the last graph used (kAbsorb or kNaive; kAbsorb for non-MLA models).
  MlaMode last_mla_path() const { return last_path_; }

  void clear() { n_past_ = 0; }
  // Forgets every token from position n on.
  void truncate(int64_t n);
  // Declares cache rows 0..n-1 valid after they were written directly (a cache loaded from a
  // file: src/runtime/cache_io.h). 0 <= n <= n_ctx().
  void set_n_past(int64_t n);

 private:
  const Model& model_;
  SessionOptions options_;
  // Declared before what is allocated in the device's memory, so it is destroyed after it.
  std::unique_ptr<ggl::Backend> backend_;
  ggl::Backend* device_ = nullptr;  // owned by backend_ (a Scheduler) when offloading
  std::optional<OffloadPlan> offload_;
  std::unique_ptr<DeviceWeights> weights_;
  std::unique_ptr<KvCache> cache_;
  OffloadTraffic traffic_;
  int64_t n_past_ = 0;
  MlaMode last_path_ = MlaMode::kAbsorb;
};

}  // namespace latte
