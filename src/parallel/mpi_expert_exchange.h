// Expert parallelism's exchange over MPI. Every rank runs the same graph on the same tokens and
// computes the (slot, token) rows routed to its own experts; at each MoE layer it sends those rows
// to every other rank and receives theirs, so that every rank sums each token's k rows in slot
// order, bit for bit as one process does. Each message starts with a hash of the layer's routing
// and a count: ranks that routed differently (diverged) fail with an error rather than mix rows.
#pragma once
#include <cstdint>
#include <vector>

#include <mpi.h>

#include "ggml-like/backend/expert_exchange.h"
#include "src/parallel/job.h"

namespace latte {

class MpiJob;

class MpiExpertExchange final : public ggl::ExpertExchange {
 public:
  explicit MpiExpertExchange(const MpiJob& job) : job_(job) {}
  // Packs this rank's rows, posts their sends to every other rank and the receipts of theirs.
  void send(const ggl::Tensor& rows, const ggl::Tensor& ids, ggl::ExpertRange computed, int64_t n_expert) override;
  // Waits for the other ranks' rows (--mpi-timeout) and writes them into `rows`.
  void receive(ggl::Tensor& rows, const ggl::Tensor& ids, ggl::ExpertRange computed, int64_t n_expert) override;
  ExchangeStats stats() const { return stats_; }

 private:
  const MpiJob& job_;
  ExchangeStats stats_;
  // The exchange in flight, from send() to receive().
  bool in_flight_ = false;
  uint64_t routing_ = 0;              // hash of the ids
  std::vector<int> owner_of_expert_;  // per expert of a layer, the rank that holds it
  std::vector<int> owner_;            // per row (slot i of token t: i + k t), the rank that computed it
  std::vector<uint32_t> count_;       // rows per rank
  std::vector<float> send_;
  std::vector<std::vector<float>> receive_;  // per rank
  std::vector<MPI_Request> requests_;
  std::vector<int> peers_;
};

}  // namespace latte
