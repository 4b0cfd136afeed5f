// Expert parallelism's meeting point. Several processes run the same graph on the same tokens,
// each holding a range of every MoE layer's experts: a mul_mat_id restricted to that range
// (graph.h, ExpertRange) computes the rows of the (slot, token) pairs routed to this process's
// experts, and an expert_exchange node completes the rows with those the other processes
// computed. Whoever connects the processes (an MPI job) implements it; the tensor library knows
// nothing of the transport.
#pragma once
#include <cstdint>

#include "ggml-like/core/tensor.h"
#include "ggml-like/graph/graph.h"

namespace ggl {

class ExpertExchange {
 public:
  virtual ~ExpertExchange() = default;
  // rows f32 [N, k, T], packed: row (i, t) holds this process's result where ids[i, t] lies in
  // `computed`. Sends those rows to the other processes (and may start receiving theirs), and
  // returns: an expert_send node. Called by a backend from one thread, after every earlier node
  // of the graph has finished; the nodes after it may run meanwhile.
  virtual void send(const Tensor& rows, const Tensor& ids, ExpertRange computed, int64_t n_expert) = 0;
  // Writes the other processes' rows into `rows` (this process's already there), after send()
  // with the same ids. Called from one thread after every earlier node has finished and before
  // any later one starts. Throws ggl::Error when a peer fails, hangs or disagrees about the ids.
  virtual void receive(Tensor& rows, const Tensor& ids, ExpertRange computed, int64_t n_expert) = 0;
};

}  // namespace ggl
