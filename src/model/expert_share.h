// Expert parallelism (`mpirun -np N latte ...`, docs/scale-out.md): each of N ranks holds a share
// of every MoE layer's routed experts, computes the (slot, token) pairs routed to them, and
// receives the other pairs' rows from the ranks that hold those experts. The shares are contiguous
// ranges, or (--ep-split FILE) sets balanced by measured routing counts.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "ggml-like/backend/expert_exchange.h"
#include "ggml-like/graph/graph.h"

namespace latte {

// Which rank holds each routed expert of each layer.
class ExpertSplit {
 public:
  ExpertSplit() = default;  // none: contiguous ranges
  // Per layer (counts[layer][e]: tokens routed to expert e, as an importance matrix counts them;
  // an empty list: a layer without routed experts), every rank gets as many experts as its
  // contiguous range would have, and the counts are spread as evenly as that allows: the most
  // used expert first, each to the rank with the least so far among those with room (ties: the
  // lower expert, the lower rank). Throws ggl::Error for no ranks or a layer of fewer experts.
  static ExpertSplit balanced(const std::vector<std::vector<double>>& counts, int ranks);

  bool contiguous() const { return owner_.empty(); }
  // Rank `rank`'s experts of `layer` (of n_expert), as the graph takes them: a range, or a set
  // whose owner table lives as long as this split.
  ggl::ExpertRange of(int64_t layer, int64_t n_expert, int rank, int ranks) const;
  // Per layer, per expert: its rank (none: contiguous ranges; an empty layer: a range too).
  const std::vector<std::vector<int32_t>>& owners() const { return owner_; }

 private:
  std::vector<std::vector<int32_t>> owner_;
};

struct ExpertShare {
  int rank = 0;
  int ranks = 1;
  std::shared_ptr<ggl::ExpertExchange> exchange;  // the other ranks' rows (ranks > 1)
  ExpertSplit split;                              // who holds what (default: contiguous ranges)
  // Send the rank's rows and compute the shared experts while they travel (else exchange, then
  // compute): LATTE_EP_OVERLAP=0, for measuring one against the other.
  bool overlap = true;
};

// Rank r of N takes experts [r E / N, (r + 1) E / N) of each layer: sizes differ by at most one.
ggl::ExpertRange rank_experts(int64_t n_expert, int rank, int ranks);
// The rank whose range holds expert e.
int expert_owner(int64_t e, int64_t n_expert, int ranks);

}  // namespace latte
