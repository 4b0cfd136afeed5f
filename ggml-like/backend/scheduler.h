// One graph across several backends (the ggml-backend-sched idea, kept small). Each node goes to
// a backend:
//   - where the external leaves it reads (weights, caches) live: a device backend when one holds
//     them (it must support the op), otherwise a host-memory backend;
//   - otherwise the backend of the node before it when that backend supports it (activations
//     stay where they are), else the host backend.
// Consecutive nodes of one backend form a part. A result that a later part reads, and a graph
// input that a device part reads, is copied into the reading backend's memory right after the
// part that made it: those copies are the activations crossing a placement boundary. Each part
// runs as a graph of its own on its backend, so every backend plans its own memory.
//
// Op offload (llama.cpp's, on by default): an expert product (mul_mat_id) whose expert weights
// live in host memory runs on the first device when the batch is long enough to pay for copying
// the experts it uses: at least min_batch * n_expert / n_used tokens (each expert then serves
// about min_batch tokens). The routing (ids) is brought to the host first, and only the experts
// it names are copied into the device's expert staging buffer.
#pragma once
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "ggml-like/backend/backend.h"

namespace ggl {

struct SplitPart {
  int backend = 0;                   // index into the scheduler's backends
  std::vector<const Tensor*> nodes;  // in execution order
  // Expert products of this part whose host-memory expert weights are copied over (op offload).
  std::vector<const Tensor*> expert_copies;
};

struct SplitOptions {
  bool op_offload = true;
  int64_t op_offload_min_batch = 32;  // tokens per expert (see above)
};

// The tokens from which an expert product with these weights [K, N, n_expert] and routing ids
// [n_used, T] runs on a device with its experts copied over.
int64_t op_offload_threshold(const SplitOptions& options, const Tensor& expert_weights, const Tensor& ids);

// A tensor's bytes copied into another backend's memory.
struct Crossing {
  const Tensor* tensor = nullptr;  // a computed result or a graph input (never a view)
  int from_part = -1;              // the part that computes it; -1: a graph input (host memory)
  int to_backend = 0;
  size_t bytes = 0;
};

struct SplitPlan {
  std::vector<int> node_backend;  // by position in graph.nodes()
  std::vector<SplitPart> parts;
  std::vector<Crossing> crossings;
  size_t crossing_bytes = 0;  // sum over crossings
};

// backends: in order of preference; the last runs in host memory and supports every op (the CPU).
// Throws ggl::Error naming the node when a node cannot be placed (reads leaves in two backends'
// memory, or its leaves live on a device whose backend cannot run it).
SplitPlan plan_split(const Graph& graph, std::span<Backend* const> backends, const SplitOptions& options = {});

class Scheduler final : public Backend {
 public:
  explicit Scheduler(std::vector<std::unique_ptr<Backend>> backends, SplitOptions options = {});
  ~Scheduler() override;

  std::string_view name() const override { return "sched"; }
  bool supports_op(const Tensor& node) const override;
  void compute(Graph& graph) override;
  void read(const Tensor& t, void* dst, size_t offset, size_t size) override;
  void synchronize() override;
  // The speeds of the preferred backend, which runs the attention when it holds it.
  double matmul_speed(Type w, int64_t k) const override { return raw_.front()->matmul_speed(w, k); }
  double attention_speed(int64_t dk, int64_t dv, int64_t heads_per_kv = 1) const override {
    return raw_.front()->attention_speed(dk, dv, heads_per_kv);
  }

  // Given to every backend (each reads the copies it made; each asks the pager, or reads the
  // leaves' own data).
  void use_prepared_weights(std::shared_ptr<const PreparedWeights> prepared) override;
  void use_paged_weights(std::shared_ptr<PagedWeights> pager) override;
  void use_expert_exchange(std::shared_ptr<ExpertExchange> exchange) override;

  std::span<Backend* const> backends() const { return raw_; }
  // The split of the last graph computed.
  const SplitPlan& last_split() const { return plan_; }
  // Expert weight bytes the last graph copied to a device (op offload).
  size_t last_expert_bytes() const { return expert_bytes_; }

 private:
  void run_part(const Graph& graph, int p, const std::vector<std::vector<size_t>>& staged_at);
  // Copies the experts the part's expert products use into its backend's expert staging buffer;
  // returns where each copied weight leaf lives there (by tensor index).
  std::vector<const void*> copy_experts(const Graph& graph, int p, const std::vector<std::vector<size_t>>& staged_at);

  std::vector<std::unique_ptr<Backend>> owned_;
  std::vector<Backend*> raw_;
  SplitOptions options_;
  SplitPlan plan_;
  size_t expert_bytes_ = 0;
  int single_ = -1;  // the backend that ran the whole last graph, when it was not split
  std::vector<std::unique_ptr<BackendBuffer>> staging_;         // per backend: crossing copies
  std::vector<std::unique_ptr<BackendBuffer>> expert_staging_;  // per backend: copied experts
  std::vector<std::vector<uint8_t>> outputs_;                   // by tensor index: outputs, in host memory
};

}  // namespace ggl
