// Memory planning for a graph's intermediate results: one arena, offsets reused once a result's
// last reader has run (liveness-based, best-fit). Backend-neutral: a backend allocates `size`
// bytes once (growing only when a larger graph comes) and places each computed tensor at its
// offset. Leaves, views and copies need no arena bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ggml-like/graph/graph.h"

namespace ggl {

struct ArenaPlan {
  static constexpr size_t kNone = static_cast<size_t>(-1);
  std::vector<size_t> offset;  // by Tensor::index; kNone for tensors outside the arena
  size_t size = 0;             // bytes the arena needs
  size_t naive_size = 0;       // what one buffer per result would take (for reporting)
};

ArenaPlan plan_arena(const Graph& graph, size_t alignment = 64);

// Points every computed tensor at its offset in an arena starting at `base`, then every view and
// copy at its base's bytes (creation order: a view's base always precedes it). Throws ggl::Error,
// naming `backend`, for a leaf without data.
void bind_arena(Graph& graph, const ArenaPlan& plan, uint8_t* base, std::string_view backend);

// Everything a plan depends on: which tensors need arena bytes and how many, what each view
// aliases, which storage every node reads, which results are outputs. Graphs of the same shape
// (e.g. successive decode steps, whose cache views grow but whose results do not) have equal
// signatures and can share a plan.
std::vector<uint64_t> plan_signature(const Graph& graph);

// Plans keyed by signature (a few recent ones), so a graph shape is planned once.
class PlanCache {
 public:
  const ArenaPlan& plan(const Graph& graph);
  size_t hits() const { return hits_; }
  size_t misses() const { return misses_; }

 private:
  static constexpr size_t kEntries = 8;
  struct Entry {
    std::vector<uint64_t> signature;
    ArenaPlan plan;
  };
  std::vector<Entry> entries_;  // most recently used last
  size_t hits_ = 0, misses_ = 0;
};

}  // namespace ggl
