// The CPU executor: one OpenMP team runs the nodes of a graph in order, every kernel splitting its
// work across the team, with a barrier between nodes that depend on each other through memory
// (independent neighbours, e.g. the projections that read the same input, run back to back). Intermediate results live in one arena,
// planned by plan_arena() once per graph shape and reused across calls; kernels get scratch space
// from a work buffer sized by the most demanding node. Graphs too small to pay for
// synchronisation run on fewer threads. The matrices it rewrites into interleaved rows when a
// model is loaded (prepare_weights: repacked_weights.h) are read in place of the file's wherever a
// graph it is given them in (use_prepared_weights) has one as a leaf. Batch-invariant graphs
// (graph.h) take kernel paths chosen without regard to the number of tokens, and attention cut at
// fixed key positions (cpu/simd/attention_merge.h). A mul_mat_id whose weights a pager holds
// (use_paged_weights) runs after thread 0 has asked the pager for the experts its ids name, the
// team meeting before and after; thread 0 hands a prefetch node's ids to the pager, and the team
// does not wait for it. Thread 0 alone runs the expert exchange's nodes (use_expert_exchange): an
// expert_send after the team met, the team going on; an expert_exchange or a token_gather between
// two meetings.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "ggml-like/backend/backend.h"
#include "ggml-like/backend/expert_exchange.h"
#include "ggml-like/backend/paged_weights.h"
#include "ggml-like/cpu/cpu_profile.h"
#include "ggml-like/cpu/repacked_weights.h"
#include "ggml-like/graph/graph_plan.h"

namespace ggl {

class CpuBackend final : public Backend {
 public:
  // n_threads <= 0: one per physical core.
  explicit CpuBackend(int n_threads = 0);
  ~CpuBackend() override;

  std::string_view name() const override { return "cpu"; }
  // Every op of graph.h has a CPU kernel.
  bool supports_op(const Tensor& node) const override { return true; }
  void compute(Graph& graph) override;
  double matmul_speed(Type w, int64_t k) const override;
  double attention_speed(int64_t dk, int64_t dv, int64_t heads_per_kv = 1) const override;
  // A RepackedWeights (nullptr where it rewrites none), read by the CPU backends given it.
  std::shared_ptr<const PreparedWeights> prepare_weights(std::span<const OfferedWeight> weights,
                                                         const std::function<void(size_t)>& on_copied) override;
  void use_prepared_weights(std::shared_ptr<const PreparedWeights> prepared) override;
  void use_paged_weights(std::shared_ptr<PagedWeights> pager) override { pager_ = std::move(pager); }
  void use_expert_exchange(std::shared_ptr<ExpertExchange> exchange) override { exchange_ = std::move(exchange); }

  int n_threads() const { return n_threads_; }
  int last_threads() const { return last_threads_; }  // threads the last graph ran on
  const PlanCache& plans() const { return plans_; }
  size_t arena_bytes() const { return arena_size_; }       // current arena capacity
  size_t last_plan_bytes() const { return last_plan_; }    // what the last graph needed
  size_t last_naive_bytes() const { return last_naive_; }  // ... without reuse
  int last_barriers() const { return last_barriers_; }     // barriers between nodes in the last graph
  // The last graph's node times, where profiling was on (cpu_profile.h); empty otherwise.
  const CpuProfile& last_profile() const { return profile_; }
  // Leaves read rewritten (prepare_weights), over every graph computed so far.
  int64_t repacked_leaves_read() const { return repacked_leaves_read_; }

 private:
  struct AlignedFree {
    void operator()(uint8_t* p) const;
  };
  using Buffer = std::unique_ptr<uint8_t, AlignedFree>;
  static void ensure(Buffer& buf, size_t& capacity, size_t bytes);
  // Fewer threads for small graphs: each thread must get enough work to pay for its barriers.
  int threads_for(const Graph& graph) const;
  std::vector<char> barriers_needed(const Graph& graph, int n_threads) const;
  void acquire_experts(const Tensor& node, std::vector<const uint8_t*>& slices) const;
  void prefetch_experts(const Tensor& node) const;
  // The exchange the node meets the other processes through; throws ggl::Error without one.
  ExpertExchange& exchange_for(const Tensor& node) const;
  void send_rows(const Tensor& node) const;  // an expert_send node, on one thread
  // An expert_exchange or token_gather node, on one thread: the other processes' part.
  void meet_others(const Tensor& node) const;

  int n_threads_;
  std::shared_ptr<const RepackedWeights> repacked_;
  std::shared_ptr<PagedWeights> pager_;
  std::shared_ptr<ExpertExchange> exchange_;
  PlanCache plans_;
  Buffer arena_;
  size_t arena_size_ = 0;
  Buffer work_;
  size_t work_size_ = 0;
  size_t last_plan_ = 0;
  size_t last_naive_ = 0;
  int last_threads_ = 0;
  int last_barriers_ = 0;
  int64_t repacked_leaves_read_ = 0;
  CpuProfile profile_;
};

// Physical cores of this machine (hyper-threads not counted); at least 1.
int physical_core_count();

}  // namespace ggl
