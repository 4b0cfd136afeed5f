#include "src/runtime/session.h"

#include <fmt/format.h>

#include <algorithm>

#include "ggml-like/core/error.h"
#include "ggml-like/registry/backend_registry.h"
#include "ggml-like/backend/scheduler.h"

namespace latte {

SessionOptions resolved_options(const Model& model, SessionOptions o) {
  if (o.n_ctx == 0) o.n_ctx = default_context(model.hparams());
  if (o.n_ctx < 0) ggl::fail("context size {} must be positive", o.n_ctx);
  if (o.n_batch <= 0) ggl::fail("batch size {} must be positive", o.n_batch);
  if (o.n_threads < 0) ggl::fail("thread count {} must not be negative", o.n_threads);
  if (o.deterministic) {
    // The absorbed form is what a decode step takes: a token's path must not depend on how many
    // tokens its graph has.
    if (o.mla_mode == MlaMode::kNaive) ggl::fail("--deterministic takes the absorbed MLA form, not --mla-mode naive");
    o.mla_mode = MlaMode::kAbsorb;
    // What -ngl 0 asks for (nothing on a device) is all it may ask.
    if (o.placement && (o.placement->gpu_layers.value_or(0) > 0 || !o.placement->overrides.empty()))
      ggl::fail("--deterministic runs on the CPU only: drop -ngl / -ot");
  }
  return o;
}

void check_token_ids(std::span<const int32_t> tokens, int64_t first_position, int64_t n_vocab, int sequence) {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= n_vocab)
      ggl::fail("{}token {} at position {} is outside the vocabulary of {} tokens",
                sequence < 0 ? std::string() : fmt::format("sequence {}: ", sequence), tokens[i],
                first_position + static_cast<int64_t>(i), n_vocab);
}

int64_t default_context(const Hparams& hp) { return std::min<int64_t>(4096, hp.n_ctx_train); }

std::optional<OffloadBackend> make_offload_backend(const Model& model, const SessionOptions& options) {
  if (!options.placement) return std::nullopt;
  std::vector<std::unique_ptr<ggl::Backend>> devices;
  if (options.devices) {
    devices = options.devices();
  } else {
    devices = ggl::available_backends({.n_threads = options.n_threads, .gpus = true});
    devices.pop_back();  // the CPU
  }
  if (devices.empty()) return std::nullopt;
  ggl::Backend& device = *devices.front();
  OffloadPlan plan =
      plan_offload(model, *options.placement, options.n_ctx, options.cache_type, options.n_batch, device);
  if (plan.placement.bytes(Device::kGpu) == 0) return std::nullopt;
  OffloadBackend o;
  std::vector<std::unique_ptr<ggl::Backend>> backends;
  backends.push_back(std::move(devices.front()));
  backends.push_back(ggl::make_backend({.n_threads = options.n_threads}));
  const ggl::SplitOptions split{.op_offload = options.op_offload, .op_offload_min_batch = options.op_offload_min_batch};
  o.backend = std::make_unique<ggl::Scheduler>(std::move(backends), split);
  o.device = &device;
  o.weights = std::make_unique<DeviceWeights>(model, device, gpu_tensor_names(plan.placement));
  o.plan = std::move(plan);
  return o;
}

Session::Session(const Model& model, SessionOptions options)
    : model_(model), options_(resolved_options(model, options)) {
  const Hparams& hp = model.hparams();
  if (std::optional<OffloadBackend> o = make_offload_backend(model, options_)) {
    backend_ = std::move(o->backend);
    device_ = o->device;
    weights_ = std::move(o->weights);
    cache_ = std::make_unique<KvCache>(hp, options_.n_ctx, options_.cache_type,
                                       cache_devices(o->plan.placement, hp.n_layer, *device_));
    offload_ = std::move(o->plan);
  } else {  // everything on the CPU: the backend alone, no scheduler
    backend_ = ggl::make_backend({.n_threads = options_.n_threads});
    cache_ = std::make_unique<KvCache>(hp, options_.n_ctx, options_.cache_type);
  }
  // The matrices the CPU rewrote when the model was loaded, read in place of the file's.
  backend_->use_prepared_weights(model.prepared_weights());
  backend_->use_paged_weights(model.expert_pager());             // routed experts beyond the memory budget
  backend_->use_expert_exchange(model.expert_share().exchange);  // the other ranks' experts (mpirun)
}

Session::~Session() = default;

void Session::truncate(int64_t n) {
  if (n < 0 || n > n_past_) ggl::fail("cannot truncate {} cached tokens to {}", n_past_, n);
  n_past_ = n;
}

void Session::set_n_past(int64_t n) {
  if (n < 0 || n > n_ctx()) ggl::fail("cannot mark {} tokens as cached in a context of {}", n, n_ctx());
  n_past_ = n;
}

std::vector<float> Session::eval(std::span<const int32_t> tokens, Logits which) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t n_vocab = model_.hparams().n_vocab;
  if (n == 0) return {};
  check_token_ids(tokens, n_past_, n_vocab);
  if (n_past_ + n > n_ctx())
    ggl::fail("{} tokens after {} cached ones exceed the context of {} tokens", n, n_past_, n_ctx());

  std::vector<float> logits(static_cast<size_t>((which == Logits::kAll ? n : 1) * n_vocab));
  for (int64_t begin = 0; begin < n; begin += options_.n_batch) {
    const int64_t count = std::min(options_.n_batch, n - begin);
    const bool last_chunk = begin + count == n;
    ForwardBatch batch;
    batch.tokens = tokens.subspan(begin, count);
    batch.n_past = n_past_;
    batch.all_logits = which == Logits::kAll;
    batch.mla_path =
        choose_mla_path(model_.hparams(), count, n_past_, options_.mla_mode, mla_speeds(model_, *backend_));

    ggl::Graph graph;
    graph.set_batch_invariant(options_.deterministic);
    ggl::Tensor* out = build_forward(graph, model_, *cache_, batch, &weights());
    if (options_.on_graph_built) options_.on_graph_built(graph);
    backend_->compute(graph);
    if (options_.on_graph_run) options_.on_graph_run(graph, *backend_);
    if (device_) {
      const auto& sched = static_cast<const ggl::Scheduler&>(*backend_);
      traffic_ = {sched.last_split().crossing_bytes, sched.last_expert_bytes(), count};
    }
    if (which == Logits::kAll) {
      backend_->read(*out, logits.data() + begin * n_vocab, 0, count * n_vocab * sizeof(float));
    } else if (last_chunk) {
      backend_->read(*out, logits.data(), 0, n_vocab * sizeof(float));
    }
    n_past_ += count;
    last_path_ = batch.mla_path;
  }
  return logits;
}

}  // namespace latte
