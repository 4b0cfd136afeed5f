#include "src/placement/expert_ranks.h"

#include <fmt/format.h>

#include "ggml-like/core/error.h"
#include "src/model/expert_share.h"
#include "src/placement/byte_size.h"

namespace latte {

std::vector<RankShare> split_experts(const RamPlan& ram, int64_t n_expert, int ranks) {
  if (ranks < 1) ggl::fail("the number of ranks must be at least 1, not {}", ranks);
  std::vector<RankShare> shares;
  for (int r = 0; r < ranks; ++r) {
    RankShare s;
    s.rank = r;
    const ggl::ExpertRange range = rank_experts(n_expert, r, ranks);  // the ranks' own split
    s.first_expert = range.first;
    s.experts = range.end - range.first;
    // Every expert of a layer has the same size, so a rank's bytes are its share of each layer's.
    s.expert_bytes = n_expert > 0 ? static_cast<size_t>(static_cast<double>(ram.experts) *
                                                        static_cast<double>(s.experts) / static_cast<double>(n_expert))
                                  : 0;
    s.resident = ram.resident + ram.work;
    shares.push_back(s);
  }
  return shares;
}

std::string rank_plan_lines(const std::vector<RankShare>& shares, int64_t n_expert, size_t budget) {
  const auto b = [](size_t v) { return format_bytes(static_cast<double>(v)); };
  std::string out;
  for (const RankShare& s : shares) {
    const std::string experts = s.experts == 0 ? std::string("no routed experts")
                                               : fmt::format("experts {}-{} of each layer's {}", s.first_expert,
                                                             s.first_expert + s.experts - 1, n_expert);
    std::string fit;
    if (budget > 0)
      fit = s.total() <= budget ? fmt::format(": fits a {} budget", b(budget))
                                : fmt::format(": over a {} budget by {}", b(budget), b(s.total() - budget));
    out += fmt::format("rank {}: {} ({}) + {} resident = {}{}\n", s.rank, experts, b(s.expert_bytes), b(s.resident),
                       b(s.total()), fit);
  }
  return out;
}

}  // namespace latte
