#include "ggml-like/graph/graph_plan.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>

#include "ggml-like/core/error.h"

namespace ggl {
namespace {

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

const Tensor* storage_base(const Tensor* t) { return t->view_src ? t->view_src : t; }

// Free ranges of the arena, keyed by offset, merged with their neighbours when released.
class FreeList {
 public:
  size_t allocate(size_t size) {
    auto best = blocks_.end();
    for (auto it = blocks_.begin(); it != blocks_.end(); ++it)
      if (it->second >= size && (best == blocks_.end() || it->second < best->second)) best = it;
    if (best == blocks_.end()) {
      // Grow at the top; if the last free block touches the top, extend it instead of leaving a hole.
      size_t offset = top_;
      if (!blocks_.empty()) {
        auto last = std::prev(blocks_.end());
        if (last->first + last->second == top_) {
          offset = last->first;
          blocks_.erase(last);
        }
      }
      top_ = offset + size;
      return offset;
    }
    const size_t offset = best->first;
    const size_t rest = best->second - size;
    blocks_.erase(best);
    if (rest > 0) blocks_[offset + size] = rest;
    return offset;
  }

  void release(size_t offset, size_t size) {
    auto it = blocks_.emplace(offset, size).first;
    auto next = std::next(it);
    if (next != blocks_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      blocks_.erase(next);
    }
    if (it != blocks_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        blocks_.erase(it);
      }
    }
  }

  size_t top() const { return top_; }

 private:
  std::map<size_t, size_t> blocks_;
  size_t top_ = 0;
};

}  // namespace

ArenaPlan plan_arena(const Graph& graph, size_t alignment) {
  const auto& tensors = graph.tensors();
  const auto& nodes = graph.nodes();
  constexpr int kForever = std::numeric_limits<int>::max();

  // Last node (position in `nodes`) that reads each storage base.
  std::vector<int> last_use(tensors.size(), -1);
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    const Tensor* n = nodes[i];
    last_use[storage_base(n)->index] = std::max(last_use[storage_base(n)->index], i);
    for (const Tensor* s : n->src)
      if (s) last_use[storage_base(s)->index] = std::max(last_use[storage_base(s)->index], i);
  }
  for (const Tensor& t : tensors)
    if (t.is_output) last_use[storage_base(&t)->index] = kForever;

  ArenaPlan plan;
  plan.offset.assign(tensors.size(), ArenaPlan::kNone);
  std::vector<std::vector<const Tensor*>> dies_at(nodes.size());
  for (const Tensor& t : tensors)
    if (t.is_computed() && last_use[t.index] != kForever && last_use[t.index] >= 0)
      dies_at[last_use[t.index]].push_back(&t);

  FreeList arena;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Tensor* n = nodes[i];
    if (n->is_computed()) {
      const size_t bytes = align_up(std::max<size_t>(n->span_bytes(), 1), alignment);
      plan.offset[n->index] = arena.allocate(bytes);
      plan.naive_size += bytes;
    }
    // Results whose last reader is this node can be reused by the nodes after it.
    for (const Tensor* t : dies_at[i])
      arena.release(plan.offset[t->index], align_up(std::max<size_t>(t->span_bytes(), 1), alignment));
  }
  plan.size = arena.top();
  return plan;
}

void bind_arena(Graph& graph, const ArenaPlan& plan, uint8_t* base, std::string_view backend) {
  for (Tensor& t : graph.tensors()) {
    if (plan.offset[t.index] != ArenaPlan::kNone) {
      t.data = base + plan.offset[t.index];
    } else if (t.view_src) {
      if (!t.view_src->data) fail("{} backend: '{}' views a tensor without data", backend, t.name);
      t.data = t.view_src->bytes() + t.view_offset;
    } else if (t.op == Op::kLeaf && !t.data) {
      fail("{} backend: leaf '{}' has no data", backend, t.name);
    }
  }
}

std::vector<uint64_t> plan_signature(const Graph& graph) {
  const auto& tensors = graph.tensors();
  std::vector<uint64_t> sig;
  sig.reserve(tensors.size() * 2 + graph.nodes().size() * (kMaxSrc + 1) + 1);
  sig.push_back(tensors.size());
  for (const Tensor& t : tensors) {
    sig.push_back(t.is_computed() ? t.span_bytes() : ~uint64_t{0});
    sig.push_back(static_cast<uint64_t>(storage_base(&t)->index) | (t.is_output ? uint64_t{1} << 63 : 0));
  }
  for (const Tensor* n : graph.nodes()) {
    sig.push_back(static_cast<uint64_t>(n->index));
    for (const Tensor* s : n->src) sig.push_back(s ? static_cast<uint64_t>(storage_base(s)->index) : ~uint64_t{0});
  }
  return sig;
}

const ArenaPlan& PlanCache::plan(const Graph& graph) {
  std::vector<uint64_t> sig = plan_signature(graph);
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].signature != sig) continue;
    ++hits_;
    std::rotate(entries_.begin() + static_cast<std::ptrdiff_t>(i),
                entries_.begin() + static_cast<std::ptrdiff_t>(i) + 1, entries_.end());
    return entries_.back().plan;
  }
  ++misses_;
  if (entries_.size() == kEntries) entries_.erase(entries_.begin());
  entries_.push_back({std::move(sig), plan_arena(graph)});
  return entries_.back().plan;
}

}  // namespace ggl
