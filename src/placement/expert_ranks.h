// Expert parallelism's memory plan (`mpirun -np N`, docs/scale-out.md): every rank holds the
// dense part (attention, caches, dense FFN, shared experts, router, embedding, head) and a
// contiguous range of each MoE layer's routed experts, the ranges' sizes differing by at most one
// expert, so that a rank's memory is the dense part plus 1/N of the experts (within one expert a
// layer). `latte info --plan --ranks N` prints it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "src/placement/memory_budget.h"

namespace latte {

struct RankShare {
  int rank = 0;
  int64_t first_expert = 0;  // of each MoE layer's n_expert
  int64_t experts = 0;       // per layer
  size_t expert_bytes = 0;   // all layers
  size_t resident = 0;       // the dense part and work buffers, as on one machine
  size_t total() const { return resident + expert_bytes; }
};

// ram: the single-machine plan (plan_ram) whose routed experts the ranks divide; ranks >= 1.
std::vector<RankShare> split_experts(const RamPlan& ram, int64_t n_expert, int ranks);
// The lines `latte info --plan --ranks N` prints, each ending in a newline: per rank its experts
// and memory, against the budget where one is known (0: none).
std::string rank_plan_lines(const std::vector<RankShare>& shares, int64_t n_expert, size_t budget);

}  // namespace latte
