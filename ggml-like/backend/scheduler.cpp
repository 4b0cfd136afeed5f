#include "ggml-like/backend/scheduler.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <utility>

#include "ggml-like/core/error.h"

namespace ggl {
namespace {

constexpr int kHostHome = -1;
constexpr size_t kStagingAlign = 256;

const Tensor* storage_base(const Tensor* t) { return t->view_src ? t->view_src : t; }

// Where an external leaf's bytes live: the device backend holding them, or kHostHome.
int home_of(const Tensor& leaf, std::span<Backend* const> backends) {
  for (size_t b = 0; b < backends.size(); ++b)
    if (backends[b]->memory() == Memory::kDevice && backends[b]->holds(leaf.data)) return static_cast<int>(b);
  return kHostHome;
}

// The backend a node runs on (see scheduler.h), given the one the node before it ran on.
int place_node(const Graph& graph, const Tensor& node, std::span<Backend* const> backends, int prev) {
  const int host = static_cast<int>(backends.size()) - 1;
  const Tensor* device_leaf = nullptr;
  const Tensor* host_leaf = nullptr;
  int device = kHostHome;
  for (const Tensor* s : node.src) {
    if (!s) continue;
    const Tensor* base = storage_base(s);
    if (base->op != Op::kLeaf || graph.is_input(*base)) continue;
    const int home = home_of(*base, backends);
    if (home == kHostHome) {
      host_leaf = base;
    } else if (device != kHostHome && device != home) {
      fail("scheduler: {} reads '{}' on {} and '{}' on {}", op_name(node.op), device_leaf->name,
           backends[device]->name(), base->name, backends[home]->name());
    } else {
      device = home;
      device_leaf = base;
    }
  }
  if (device != kHostHome) {
    if (host_leaf)
      fail("scheduler: {} reads '{}' on {} and '{}' in host memory", op_name(node.op), device_leaf->name,
           backends[device]->name(), host_leaf->name);
    if (!backends[device]->supports_op(node))
      fail("scheduler: {} holds '{}' but cannot run {} on it", backends[device]->name(), device_leaf->name,
           op_name(node.op));
    return device;
  }
  const Backend& p = *backends[prev];
  const bool stay = p.supports_op(node) && (!host_leaf || p.memory() == Memory::kHost);
  return stay ? prev : host;
}

size_t align_up(size_t n) { return (n + kStagingAlign - 1) / kStagingAlign * kStagingAlign; }

// Whether an expert product runs on the first backend (a device) with its host-memory experts
// copied over: the weights are an external leaf of their own (not a view), the routing is
// computed on the way, and the batch reaches the threshold.
bool offloads_experts(const Graph& graph, const Tensor& node, std::span<Backend* const> backends,
                      const SplitOptions& options) {
  if (!options.op_offload || node.op != Op::kMulMatId || backends.size() < 2) return false;
  const Backend& device = *backends.front();
  if (device.memory() != Memory::kDevice || !device.supports_op(node)) return false;
  const Tensor& w = *node.src[0];
  if (w.op != Op::kLeaf || w.view_src || graph.is_input(w) || home_of(w, backends) != kHostHome) return false;
  // x may be a graph input (copied over like any); other external leaves would pin the node, and
  // the routing must be computed so it can be brought to the host.
  for (int i = 1; i < kMaxSrc; ++i)
    if (const Tensor* s = node.src[i] ? storage_base(node.src[i]) : nullptr;
        s && s->op == Op::kLeaf && !graph.is_input(*s))
      return false;
  const Tensor& ids = *node.src[2];
  if (storage_base(&ids)->op == Op::kLeaf) return false;
  return ids.ne[1] >= op_offload_threshold(options, w, ids);
}

}  // namespace

int64_t op_offload_threshold(const SplitOptions& options, const Tensor& expert_weights, const Tensor& ids) {
  const int64_t n_expert = expert_weights.ne[2], n_used = std::max<int64_t>(ids.ne[0], 1);
  return (options.op_offload_min_batch * n_expert + n_used - 1) / n_used;
}

SplitPlan plan_split(const Graph& graph, std::span<Backend* const> backends, const SplitOptions& options) {
  if (backends.empty()) fail("scheduler: no backends");
  const int host = static_cast<int>(backends.size()) - 1;
  if (backends[host]->memory() != Memory::kHost)
    fail("scheduler: the last backend ({}) must run in host memory", backends[host]->name());

  const auto& nodes = graph.nodes();
  SplitPlan plan;
  plan.node_backend.resize(nodes.size());
  std::vector<int> part_of(graph.tensors().size(), -1);
  int prev = host;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const bool copies = offloads_experts(graph, *nodes[i], backends, options);
    const int b = copies ? 0 : place_node(graph, *nodes[i], backends, prev);
    plan.node_backend[i] = prev = b;
    bool cut = plan.parts.empty() || plan.parts.back().backend != b;
    // The routing must be on the host before the experts it names are copied: it may not be made
    // in the part that copies them.
    if (copies && !cut) cut = part_of[storage_base(nodes[i]->src[2])->index] == static_cast<int>(plan.parts.size()) - 1;
    if (cut) plan.parts.push_back({b, {}, {}});
    plan.parts.back().nodes.push_back(nodes[i]);
    if (copies) plan.parts.back().expert_copies.push_back(nodes[i]);
    part_of[nodes[i]->index] = static_cast<int>(plan.parts.size()) - 1;
  }

  std::map<std::pair<int, int>, size_t> seen;  // (tensor index, to backend)
  for (size_t p = 0; p < plan.parts.size(); ++p) {
    const int to = plan.parts[p].backend;
    for (const Tensor* n : plan.parts[p].nodes)
      for (const Tensor* s : n->src) {
        if (!s) continue;
        const Tensor* base = storage_base(s);
        int from = -1;
        if (base->op == Op::kLeaf) {
          if (!graph.is_input(*base) || backends[to]->memory() == Memory::kHost) continue;
        } else {
          from = part_of[base->index];
          if (from == static_cast<int>(p)) continue;
        }
        if (!seen.emplace(std::pair{base->index, to}, plan.crossings.size()).second) continue;
        plan.crossings.push_back({base, from, to, base->span_bytes()});
        plan.crossing_bytes += base->span_bytes();
      }
    // Expert copies read their routing on the host.
    for (const Tensor* n : plan.parts[p].expert_copies) {
      const Tensor* ids = storage_base(n->src[2]);
      if (!seen.emplace(std::pair{ids->index, host}, plan.crossings.size()).second) continue;
      plan.crossings.push_back({ids, part_of[ids->index], host, ids->span_bytes()});
      plan.crossing_bytes += ids->span_bytes();
    }
  }
  return plan;
}

Scheduler::Scheduler(std::vector<std::unique_ptr<Backend>> backends, SplitOptions options)
    : owned_(std::move(backends)), options_(options) {
  if (owned_.empty()) fail("scheduler: no backends");
  for (auto& b : owned_) raw_.push_back(b.get());
  if (raw_.back()->memory() != Memory::kHost)
    fail("scheduler: the last backend ({}) must run in host memory", raw_.back()->name());
  staging_.resize(raw_.size());
  expert_staging_.resize(raw_.size());
}

Scheduler::~Scheduler() {
  // Buffers before the backends that own them.
  staging_.clear();
  expert_staging_.clear();
}

bool Scheduler::supports_op(const Tensor& node) const {
  for (const Backend* b : raw_)
    if (b->supports_op(node)) return true;
  return false;
}

void Scheduler::use_prepared_weights(std::shared_ptr<const PreparedWeights> prepared) {
  for (Backend* b : raw_) b->use_prepared_weights(prepared);
}

void Scheduler::use_paged_weights(std::shared_ptr<PagedWeights> pager) {
  for (Backend* b : raw_) b->use_paged_weights(pager);
}

void Scheduler::use_expert_exchange(std::shared_ptr<ExpertExchange> exchange) {
  for (Backend* b : raw_) b->use_expert_exchange(exchange);
}

void Scheduler::synchronize() {
  for (Backend* b : raw_) b->synchronize();
}

void Scheduler::compute(Graph& graph) {
  plan_ = plan_split(graph, raw_, options_);
  expert_bytes_ = 0;
  if (plan_.parts.size() <= 1 && plan_.crossings.empty()) {
    single_ = plan_.parts.empty() ? static_cast<int>(raw_.size()) - 1 : plan_.parts.front().backend;
    raw_[single_]->compute(graph);
    return;
  }
  single_ = -1;

  // Where each crossing lands in its backend's staging buffer.
  std::vector<size_t> need(raw_.size(), 0);
  std::vector<std::vector<size_t>> staged_at(graph.tensors().size());  // by tensor: offset per backend
  for (const Crossing& c : plan_.crossings) {
    auto& at = staged_at[c.tensor->index];
    at.resize(raw_.size(), static_cast<size_t>(-1));
    at[c.to_backend] = need[c.to_backend];
    need[c.to_backend] += align_up(c.bytes);
  }
  for (size_t b = 0; b < raw_.size(); ++b)
    if (need[b] > 0 && (!staging_[b] || staging_[b]->size() < need[b])) {
      staging_[b].reset();
      staging_[b] = raw_[b]->allocate(need[b]);
    }

  // Graph inputs read by device parts go over first.
  Backend& host = *raw_.back();
  for (const Crossing& c : plan_.crossings)
    if (c.from_part < 0)
      copy_between(host, c.tensor->data, *raw_[c.to_backend],
                   staging_[c.to_backend]->base() + staged_at[c.tensor->index][c.to_backend], c.bytes);

  outputs_.assign(graph.tensors().size(), {});
  for (size_t p = 0; p < plan_.parts.size(); ++p) run_part(graph, static_cast<int>(p), staged_at);
}

void Scheduler::run_part(const Graph& graph, int p, const std::vector<std::vector<size_t>>& staged_at) {
  const SplitPart& part = plan_.parts[p];
  Backend& backend = *raw_[part.backend];
  const std::vector<const void*> experts = copy_experts(graph, p, staged_at);
  std::vector<char> leaves_part(graph.tensors().size(), 0);  // results read by a later part
  for (const Crossing& c : plan_.crossings)
    if (c.from_part == p) leaves_part[c.tensor->index] = 1;

  Graph sub;
  sub.set_batch_invariant(graph.batch_invariant());
  std::vector<Tensor*> mapped(graph.tensors().size(), nullptr);
  // t as a tensor of `sub`: results of this part as replicated, everything else as a leaf over
  // its bytes where this backend can read them (a staged copy, or the leaf's own memory).
  const auto bring = [&](const Tensor* t) -> Tensor* {
    if (mapped[t->index]) return mapped[t->index];
    const Tensor* base = storage_base(t);
    Tensor*& b = mapped[base->index];
    if (!b) {
      const void* data = base->data;
      const auto& at = staged_at[base->index];
      if (!at.empty() && at[part.backend] != static_cast<size_t>(-1))
        data = staging_[part.backend]->base() + at[part.backend];
      else if (!experts.empty() && experts[base->index])
        data = experts[base->index];
      else if (base->op != Op::kLeaf)
        fail("scheduler: '{}' is read on {} but was not copied there", base->name, backend.name());
      b = sub.external(base->type, std::span<const int64_t>(base->ne, kMaxDims), data, base->name);
    }
    if (t == base) return b;
    return mapped[t->index] = sub.view(b, {t->ne[0], t->ne[1], t->ne[2], t->ne[3]},
                                       {t->nb[0], t->nb[1], t->nb[2], t->nb[3]}, t->view_offset, t->name);
  };
  for (const Tensor* n : part.nodes) {
    std::array<Tensor*, kMaxSrc> srcs{};
    for (int i = 0; i < kMaxSrc; ++i)
      if (n->src[i]) srcs[i] = bring(n->src[i]);
    Tensor* r = sub.replicate(*n, srcs);
    mapped[n->index] = r;
    if (n->is_output || leaves_part[n->index]) sub.mark_output(r);
  }
  backend.compute(sub);

  for (const Crossing& c : plan_.crossings)
    if (c.from_part == p)
      copy_between(backend, mapped[c.tensor->index]->data, *raw_[c.to_backend],
                   staging_[c.to_backend]->base() + staged_at[c.tensor->index][c.to_backend], c.bytes);
  for (const Tensor* n : part.nodes)
    if (n->is_output) {
      auto& out = outputs_[n->index];
      out.resize(n->span_bytes());
      backend.read(*mapped[n->index], out.data(), 0, out.size());
    }
}

std::vector<const void*> Scheduler::copy_experts(const Graph& graph, int p,
                                                 const std::vector<std::vector<size_t>>& staged_at) {
  const SplitPart& part = plan_.parts[p];
  if (part.expert_copies.empty()) return {};
  const int b = part.backend, host = static_cast<int>(raw_.size()) - 1;
  Backend& device = *raw_[b];
  // Each weight gets its full size, so the ids index it unchanged; only the used experts' bytes
  // are filled in.
  constexpr size_t kNone = static_cast<size_t>(-1);
  std::vector<size_t> offset(graph.tensors().size(), kNone);
  size_t need = 0;
  for (const Tensor* n : part.expert_copies) {
    const Tensor* w = n->src[0];
    if (offset[w->index] != kNone) continue;
    offset[w->index] = need;
    need += align_up(w->span_bytes());
  }
  device.synchronize();  // an earlier part may still read the staging buffer
  if (!expert_staging_[b] || expert_staging_[b]->size() < need) {
    expert_staging_[b].reset();
    expert_staging_[b] = device.allocate(need);
  }
  std::vector<std::vector<char>> copied(graph.tensors().size());
  for (const Tensor* n : part.expert_copies) {
    const Tensor* w = n->src[0];
    const Tensor* ids = n->src[2];
    const Tensor* ids_base = storage_base(ids);
    const uint8_t* ids_bytes =
        staging_[host]->base() + staged_at[ids_base->index][host] + (ids->view_src ? ids->view_offset : 0);
    const int64_t n_expert = w->ne[2];
    const size_t expert_bytes = w->nb[2];
    std::vector<char>& done = copied[w->index];
    done.resize(static_cast<size_t>(n_expert), 0);
    std::vector<char> used(static_cast<size_t>(n_expert), 0);
    for (int64_t t = 0; t < ids->ne[1]; ++t)
      for (int64_t i = 0; i < ids->ne[0]; ++i) {
        int32_t e;
        std::memcpy(&e, ids_bytes + t * ids->nb[1] + i * ids->nb[0], sizeof e);
        if (e < 0 || e >= n_expert) fail("scheduler: {} routes to expert {} of {}", op_name(n->op), e, n_expert);
        if (!done[e]) used[e] = 1;
      }
    uint8_t* dst = expert_staging_[b]->base() + offset[w->index];
    const auto* src = static_cast<const uint8_t*>(w->data);
    // Runs of consecutive used experts go over in one copy each.
    for (int64_t e = 0; e < n_expert;) {
      if (!used[e]) {
        ++e;
        continue;
      }
      int64_t end = e;
      while (end < n_expert && used[end]) done[end++] = 1;
      const size_t from = static_cast<size_t>(e) * expert_bytes, bytes = static_cast<size_t>(end - e) * expert_bytes;
      copy_between(*raw_[host], src + from, device, dst + from, bytes);
      expert_bytes_ += bytes;
      e = end;
    }
  }
  std::vector<const void*> at(graph.tensors().size(), nullptr);
  for (const Tensor* n : part.expert_copies)
    at[n->src[0]->index] = expert_staging_[b]->base() + offset[n->src[0]->index];
  return at;
}

void Scheduler::read(const Tensor& t, void* dst, size_t offset, size_t size) {
  if (single_ >= 0) return raw_[single_]->read(t, dst, offset, size);
  if (t.index < 0 || static_cast<size_t>(t.index) >= outputs_.size() || outputs_[t.index].empty())
    fail("scheduler: '{}' is not an output of the last graph", t.name);
  const auto& out = outputs_[t.index];
  if (offset + size > out.size())
    fail("scheduler: reading {} bytes at {} from '{}' ({} bytes)", size, offset, t.name, out.size());
  std::memcpy(dst, out.data() + offset, size);
}

}  // namespace ggl
