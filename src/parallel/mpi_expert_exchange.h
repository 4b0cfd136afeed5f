// Expert parallelism's exchange over MPI. Every rank runs the same graph on the same tokens and
// computes the (slot, token) rows routed to its own experts; at each MoE layer it sends those rows
// to every other rank and receives theirs, so that every rank sums each token's k rows in slot
// order, bit for bit as one process does. Each message starts with a hash of the layer's routing
// and a count: ranks that routed differently (diverged) fail with an error rather than mix rows.
#pragma once
#include <cstdint>
#include <vector>

#include "ggml-like/backend/expert_exchange.h"
#include "src/parallel/job.h"

namespace latte {

class MpiJob;

class MpiExpertExchange final : public ggl::ExpertExchange {
 public:
  explicit MpiExpertExchange(const MpiJob& job) : job_(job) {}
  void exchange(ggl::Tensor& rows, const ggl::Tensor& ids, ggl::ExpertRange computed, int64_t n_expert) override;
  ExchangeStats stats() const { return stats_; }

 private:
  const MpiJob& job_;
  ExchangeStats stats_;
  std::vector<float> send_;
  std::vector<std::vector<float>> receive_;  // per rank
};

}  // namespace latte
