// Expert parallelism's exchange over MPI. Every rank computes the (slot, token) rows routed to its
// own experts; at each MoE layer it sends those rows to the ranks that need them and receives
// theirs, so that every rank sums each token's k rows in slot order, bit for bit as one process
// does. Either every rank runs the same tokens (and needs every row), or each runs its own
// (data parallelism): then the tokens are first gathered from every rank (gather), and a row goes
// back to its token's rank only. Each message of rows starts with a hash of the layer's routing
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
  void send(const ggl::Tensor& rows, const ggl::Tensor& ids, const ggl::ExchangeRows& what) override;
  // Waits for the other ranks' rows (--mpi-timeout) and writes them into `rows`.
  void receive(ggl::Tensor& rows, const ggl::Tensor& ids, const ggl::ExchangeRows& what) override;
  // Every rank's count (an allgather, waiting --mpi-timeout).
  std::vector<int64_t> token_counts(int64_t mine) override;
  // Sends this rank's rows to every other rank and receives theirs in place.
  void gather(ggl::Tensor& all, int64_t first, int64_t n) override;
  ExchangeStats stats() const { return stats_; }

 private:
  const MpiJob& job_;
  ExchangeStats stats_;
  // Posts the receipt of `count` floats at `to` from rank `from`, and the send of `count` floats
  // at `data` to rank `to`, with a tag.
  void post_receive(float* to, size_t count, int from, int tag);
  void post_send(const float* data, size_t count, int to, int tag);

  std::vector<int64_t> counts_;  // every rank's tokens of the step (token_counts)
  // The exchange in flight, from send() to receive().
  bool in_flight_ = false;
  bool gathered_ = false;
  uint64_t routing_ = 0;                            // hash of the ids
  std::vector<int> owner_of_expert_;                // per expert of a layer, the rank that holds it
  std::vector<int> owner_;                          // per row (slot i of token t: i + k t), the rank that computed it
  std::vector<int> home_;                           // gathered: per token, the rank whose token it is
  std::vector<uint32_t> incoming_;                  // rows to receive from each rank
  std::vector<std::vector<float>> send_, receive_;  // per rank: header and rows
  std::vector<MPI_Request> requests_;
  std::vector<int> peers_;
};

}  // namespace latte
