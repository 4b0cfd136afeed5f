// Memory planning for a graph's intermediate results: one arena, offsets reused once a result's
// last reader has run (liveness-based, best-fit). Backend-neutral: a backend allocates `size`
// bytes once (growing only when a larger graph comes) and places each computed tensor at its
// offset. Leaves, views and copies need no arena bytes.
#pragma once
#include <cstddef>
#include <vector>

#include "ggml-like/graph.h"

namespace ggl {

struct ArenaPlan {
  static constexpr size_t kNone = static_cast<size_t>(-1);
  std::vector<size_t> offset;  // by Tensor::index; kNone for tensors outside the arena
  size_t size = 0;             // bytes the arena needs
  size_t naive_size = 0;       // what one buffer per result would take (for reporting)
};

ArenaPlan plan_arena(const Graph& graph, size_t alignment = 64);

}  // namespace ggl
