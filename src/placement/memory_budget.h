// The RAM tier of the placement: how much memory the process may use (--mem-budget, by default
// what Linux allows it: the memory cgroup's limit, page cache included, or MemAvailable, less a
// headroom), and how that budget splits between what every token reads, kept resident
// (attention, caches, dense FFN, shared experts, router, embedding, head, work buffers), and a
// cache of routed experts taking the rest. A budget smaller than the resident part is reported,
// not refused: the run would page.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "src/placement/placement.h"

namespace latte {

// What Linux says about the memory this process may use.
struct MemoryLimits {
  std::optional<size_t> cgroup_limit;   // the memory cgroup's limit; nullopt where there is none
  std::optional<size_t> mem_available;  // /proc/meminfo's MemAvailable
};
// Reads them under `root` ("/" on a live system; tests give a directory laid out the same way):
// proc/self/cgroup names the cgroup, then sys/fs/cgroup/memory/<path>/memory.limit_in_bytes (v1)
// or sys/fs/cgroup/<path>/memory.max (v2); proc/meminfo. v1's "no limit" (a value near 2^63) and
// v2's "max" read as none.
MemoryLimits read_memory_limits(const std::string& root = "/");

// The default --mem-budget: the smaller of the cgroup limit and MemAvailable, less 5% of it (at
// least 256 MiB) for the rest of the process and the system; nullopt where neither is known.
std::optional<size_t> default_memory_budget(const MemoryLimits& limits);

// The budget `--mem-budget VALUE` names (a size, e.g. 16G, or `none`: every tensor stays in RAM,
// nothing is paged), or with no value this system's default; `source` says which, for the line
// that shows it ("--mem-budget", "the memory cgroup's limit or MemAvailable, less 5%"). bytes is
// nullopt for `none`, and where no value is given and the system tells no limit. Throws ggl::Error
// naming `flag` (as the user typed it) for a value that is neither.
struct MemoryBudget {
  std::optional<size_t> bytes;
  std::string source;
};
MemoryBudget memory_budget(const std::string& value, const std::string& flag);

// How a budget holds the CPU's share of a placement.
struct RamPlan {
  size_t budget = 0;
  size_t resident = 0;        // the CPU's tensors but its routed experts, caches included
  size_t work = 0;            // compute buffers
  size_t experts = 0;         // the CPU's routed experts, all layers
  size_t expert_bytes = 0;    // the largest single expert of a layer (its gate, up and down)
  int64_t expert_count = 0;   // experts on the CPU, all layers
  size_t expert_cache = 0;    // what the budget leaves for routed experts (0 where none is left)
  int64_t cache_experts = 0;  // whole experts that fit it (at most expert_count)
  // Bytes a token reads from disk when routing is uniformly random over n_expert_used of
  // n_expert and the cache holds an equal share of every layer's experts (the synthetic
  // weights' worst case; trained models reuse experts more).
  double uniform_miss_bytes_per_token = 0;

  bool resident_fits() const { return resident + work <= budget; }
  bool all_experts_fit() const { return cache_experts >= expert_count; }
};

// n_expert / n_expert_used: the model's (0 for a dense model: every tensor is resident).
RamPlan plan_ram(const Placement& p, size_t budget, size_t work_bytes, int64_t n_expert, int64_t n_expert_used);

// The lines `latte info --plan` prints for it, each ending in a newline; the last a warning where
// the resident part does not fit.
std::string ram_plan_lines(const RamPlan& r);

}  // namespace latte
