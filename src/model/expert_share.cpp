#include "src/model/expert_share.h"

#include <algorithm>
#include <numeric>

#include "ggml-like/core/error.h"

namespace latte {

ggl::ExpertRange rank_experts(int64_t n_expert, int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks) ggl::fail("rank {} of {} is not a rank", rank, ranks);
  return {static_cast<int32_t>(n_expert * rank / ranks), static_cast<int32_t>(n_expert * (rank + 1) / ranks)};
}

int expert_owner(int64_t e, int64_t n_expert, int ranks) {
  for (int r = 0; r < ranks; ++r)
    if (rank_experts(n_expert, r, ranks).holds(e, n_expert)) return r;
  ggl::fail("expert {} is not one of {}", e, n_expert);
}

ExpertSplit ExpertSplit::balanced(const std::vector<std::vector<double>>& counts, int ranks) {
  if (ranks < 1) ggl::fail("{} ranks to split the experts among", ranks);
  ExpertSplit split;
  for (size_t layer = 0; layer < counts.size(); ++layer) {
    const std::vector<double>& c = counts[layer];
    std::vector<int32_t>& owner = split.owner_.emplace_back(c.size(), 0);
    if (c.empty()) continue;
    const auto E = static_cast<int64_t>(c.size());
    if (E < ranks) ggl::fail("layer {}: {} experts cannot be split among {} ranks", layer, E, ranks);
    std::vector<int64_t> room(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
      const ggl::ExpertRange range = rank_experts(E, r, ranks);
      room[static_cast<size_t>(r)] = range.end - range.first;
    }
    std::vector<int32_t> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return c[a] > c[b]; });
    std::vector<double> load(static_cast<size_t>(ranks), 0.0);
    for (const int32_t e : order) {
      int best = -1;
      for (int r = 0; r < ranks; ++r)
        if (room[static_cast<size_t>(r)] > 0 &&
            (best < 0 || load[static_cast<size_t>(r)] < load[static_cast<size_t>(best)]))
          best = r;
      owner[static_cast<size_t>(e)] = best;
      --room[static_cast<size_t>(best)];
      load[static_cast<size_t>(best)] += c[static_cast<size_t>(e)];
    }
  }
  return split;
}

ggl::ExpertRange ExpertSplit::of(int64_t layer, int64_t n_expert, int rank, int ranks) const {
  if (contiguous() || layer < 0 || static_cast<size_t>(layer) >= owner_.size() ||
      owner_[static_cast<size_t>(layer)].empty())
    return rank_experts(n_expert, rank, ranks);
  const std::vector<int32_t>& owner = owner_[static_cast<size_t>(layer)];
  if (static_cast<int64_t>(owner.size()) != n_expert)
    ggl::fail("layer {}: the expert split has {} experts, the model {}", layer, owner.size(), n_expert);
  return {.owner = owner.data(), .process = rank};
}

}  // namespace latte
