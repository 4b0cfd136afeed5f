// Expert parallelism (`mpirun -np N latte ...`, docs/scale-out.md): each of N ranks holds a
// contiguous range of every MoE layer's routed experts, computes the (slot, token) pairs routed to
// them, and receives the other pairs' rows from the ranks that hold those experts.
#pragma once
#include <cstdint>
#include <memory>

#include "ggml-like/backend/expert_exchange.h"
#include "ggml-like/graph/graph.h"

namespace latte {

struct ExpertShare {
  int rank = 0;
  int ranks = 1;
  std::shared_ptr<ggl::ExpertExchange> exchange;  // the other ranks' rows (ranks > 1)
  // Send the rank's rows and compute the shared experts while they travel (else exchange, then
  // compute): LATTE_EP_OVERLAP=0, for measuring one against the other.
  bool overlap = true;
};

// Rank r of N takes experts [r E / N, (r + 1) E / N) of each layer: sizes differ by at most one.
ggl::ExpertRange rank_experts(int64_t n_expert, int rank, int ranks);
// The rank whose range holds expert e.
int expert_owner(int64_t e, int64_t n_expert, int ranks);

}  // namespace latte
