#include "src/model/expert_share.h"

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

}  // namespace latte
