// Expert parallelism's meeting point. Several processes each hold a range of every MoE layer's
// experts: a mul_mat_id restricted to that range (graph.h, ExpertRange) computes the rows of the
// (slot, token) pairs routed to this process's experts, and an expert_exchange node completes the
// rows with those the other processes computed. The processes either run the same graph on the
// same tokens, or (data parallelism) each its own tokens, gathered before each MoE layer by a
// token_gather node. Whoever connects the processes (an MPI job) implements it; the tensor
// library knows nothing of the transport.
#pragma once
#include <cstdint>
#include <vector>

#include "ggml-like/core/tensor.h"
#include "ggml-like/graph/graph.h"

namespace ggl {

class ExpertExchange {
 public:
  virtual ~ExpertExchange() = default;
  // rows f32 [N, k, T], packed: row (i, t) holds this process's result where ids[i, t] lies in
  // what.computed. Sends those rows to the other processes that need them (every other process,
  // or, gathered, the token's own) and may start receiving theirs; returns: an expert_send node.
  // Called by a backend from one thread, after every earlier node of the graph has finished; the
  // nodes after it may run meanwhile.
  virtual void send(const Tensor& rows, const Tensor& ids, const ExchangeRows& what) = 0;
  // Writes the other processes' rows into `rows` (this process's already there): every row, or,
  // gathered, those of this process's own tokens. After send() with the same ids. Called from one
  // thread after every earlier node has finished and before any later one starts. Throws
  // ggl::Error when a peer fails, hangs or disagrees about the ids.
  virtual void receive(Tensor& rows, const Tensor& ids, const ExchangeRows& what) = 0;

  // Data parallelism: each process evaluates tokens of its own (its own sequences, their caches)
  // and every MoE layer's experts see the tokens of all of them (Graph::token_gather).
  // Before building a graph, every process gives its count of tokens and gets all of them, in
  // process order: the same vector everywhere. A process with none still takes part in the step.
  virtual std::vector<int64_t> token_counts(int64_t mine) = 0;
  // all f32 [D, total of the last token_counts()]: this process's n rows are in place at
  // [first, first + n); sends them to the others and writes theirs at their places. Called from
  // one thread between two meetings of the team. Throws ggl::Error as receive() does, and when the
  // counts disagree with the last token_counts().
  virtual void gather(Tensor& all, int64_t first, int64_t n) = 0;
};

}  // namespace ggl
