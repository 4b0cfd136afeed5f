#include "ggml-like/cpu/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "ggml-like/cpu/attention_int16.h"
#include "ggml-like/cpu/op_thread.h"
#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/cpu/kernel_set.h"
#include "ggml-like/core/error.h"
#include "ggml-like/graph/graph_plan.h"

namespace ggl {

// A barrier that spins briefly and then yields the core: threads arriving early must not burn
// the time slice of a thread that is still working (or waiting to be scheduled) on a busy machine.
class CpuBarrier {
 public:
  explicit CpuBarrier(int n) : n_(n) {}
  void wait() {
    if (n_ == 1) return;
    const unsigned gen = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) == n_ - 1) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
      return;
    }
    for (int spins = 0; generation_.load(std::memory_order_acquire) == gen; ++spins) {
      if (spins < kSpins) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else {
        std::this_thread::yield();
      }
    }
  }

 private:
  static constexpr int kSpins = 256;
  const int n_;
  std::atomic<int> arrived_{0};
  std::atomic<unsigned> generation_{0};
};

void CpuThread::barrier() const { team_barrier->wait(); }

double cpu_node_cost(const Tensor& node) {
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  switch (node.op) {
    case Op::kLeaf:
    case Op::kView: return 0;
    case Op::kMulMat: return d(node.n_elements()) * d(node.src[0]->ne[0]);
    case Op::kMulMatT: return d(node.n_elements()) * d(node.src[0]->ne[1]);
    case Op::kMulMatId: return d(node.n_elements()) * d(node.src[0]->ne[0]);
    case Op::kFlashAttn: {
      const Tensor& q = *node.src[0];
      return d(q.ne[1]) * d(q.ne[2]) * d(node.src[1]->ne[2]) * d(q.ne[0] + node.ne[0]);
    }
    default: return d(node.n_elements());
  }
}

void CpuBackend::AlignedFree::operator()(uint8_t* p) const { std::free(p); }

void CpuBackend::ensure(Buffer& buf, size_t& capacity, size_t bytes) {
  if (bytes <= capacity && buf) return;
  const size_t size = std::max<size_t>((bytes + 4095) / 4096 * 4096, 4096);
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(4096, size));
  if (!p) fail("cpu backend: cannot allocate {} bytes for intermediate results", size);
  buf.reset(p);
  capacity = size;
}

int CpuBackend::threads_for(const Graph& graph) const {
  // Multiply-adds (or element operations) per thread below which another thread costs more in
  // synchronisation than it saves.
  constexpr double kWorkPerThread = 512.0 * 1024.0;
  double work = 0;
  for (const Tensor* n : graph.nodes()) work += cpu_node_cost(*n);
  const double wanted = std::max(1.0, work / kWorkPerThread);
  return static_cast<int>(std::min<double>(n_threads_, wanted));
}

CpuBackend::CpuBackend(int n_threads) : n_threads_(n_threads > 0 ? n_threads : physical_core_count()) {}
CpuBackend::~CpuBackend() = default;

namespace {

// Byte ranges a node reads and writes, for deciding where barriers are needed.
struct Range {
  const uint8_t* begin;
  const uint8_t* end;
  bool overlaps(const Range& o) const { return begin < o.end && o.begin < end; }
};

Range range_of(const Tensor& t) { return {t.bytes(), t.bytes() + t.span_bytes()}; }

bool any_overlap(const std::vector<Range>& a, const std::vector<Range>& b) {
  for (const Range& x : a)
    for (const Range& y : b)
      if (x.overlaps(y)) return true;
  return false;
}

// Row-wise kernels split their rows across the team, so a result of one row (a decode step's
// norms, residual adds, router softmax and top-k, ...) is computed by thread 0 alone.
bool runs_on_thread0_only(const Tensor& n) {
  switch (n.op) {
    case Op::kGetRows:
    case Op::kRmsNorm:
    case Op::kAdd:
    case Op::kMul:
    case Op::kDiv:
    case Op::kScale:
    case Op::kSigmoid:
    case Op::kSilu:
    case Op::kSwiglu:
    case Op::kSumRows:
    case Op::kSoftmax:
    case Op::kTopK:
    case Op::kConcat:
    case Op::kCont:
    case Op::kCopy: return n.n_rows() == 1;
    case Op::kPrefetch:        // thread 0 hands it to the pager
    case Op::kExpertSend:      // thread 0 sends the rows
    case Op::kExpertExchange:  // thread 0 exchanges the rows
    case Op::kTokenGather:     // thread 0 gathers the tokens
      return true;
    default: return false;
  }
}

}  // namespace

// A node may start while other threads are still in earlier nodes when it neither reads what they
// write nor writes what they read or write (the arena reuses memory, so write-after-read matters
// too). Nodes with scratch space conflict with each other through the shared work buffer. Two
// nodes that both run on thread 0 alone never need a barrier between them: program order holds.
// Returns, per node, whether the team must meet at a barrier before running it.
std::vector<char> CpuBackend::barriers_needed(const Graph& graph, int n_threads) const {
  const auto& nodes = graph.nodes();
  std::vector<char> need(nodes.size(), 0);
  // Accesses since the last barrier, of nodes run by the whole team and by thread 0 alone.
  std::vector<Range> team_reads, team_writes, solo_reads, solo_writes, reads, writes;
  const Range work{work_.get(), work_.get() + work_size_};
  bool first = true;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Tensor& n = *nodes[i];
    if (n.op == Op::kView || n.op == Op::kLeaf) continue;
    reads.clear();
    writes.clear();
    for (const Tensor* s : n.src)
      if (s && s->data) reads.push_back(range_of(*s));
    writes.push_back(range_of(n));
    if (cpu_work_bytes(n, n_threads, graph.batch_invariant()) > 0) {
      reads.push_back(work);
      writes.push_back(work);
    }
    const bool solo = runs_on_thread0_only(n);
    bool conflict =
        any_overlap(reads, team_writes) || any_overlap(writes, team_reads) || any_overlap(writes, team_writes);
    if (!solo)
      conflict = conflict || any_overlap(reads, solo_writes) || any_overlap(writes, solo_reads) ||
                 any_overlap(writes, solo_writes);
    if (conflict && !first) {
      need[i] = 1;
      team_reads.clear();
      team_writes.clear();
      solo_reads.clear();
      solo_writes.clear();
    }
    first = false;
    auto& r = solo ? solo_reads : team_reads;
    auto& w = solo ? solo_writes : team_writes;
    r.insert(r.end(), reads.begin(), reads.end());
    w.insert(w.end(), writes.begin(), writes.end());
  }
  return need;
}

std::shared_ptr<const PreparedWeights> CpuBackend::prepare_weights(std::span<const OfferedWeight> weights,
                                                                   const std::function<void(size_t)>& on_copied) {
  auto repacked = std::make_shared<const RepackedWeights>(weights, on_copied);
  if (repacked->count() == 0) return nullptr;
  return repacked;
}

void CpuBackend::use_prepared_weights(std::shared_ptr<const PreparedWeights> prepared) {
  repacked_ = std::dynamic_pointer_cast<const RepackedWeights>(std::move(prepared));
}

void CpuBackend::compute(Graph& graph) {
  // The rewritten matrices in place of the file's first: a node's work bytes depend on its types.
  const ReadingCopies reading(graph, repacked_.get());
  repacked_leaves_read_ += reading.leaves();
  const ArenaPlan& plan = plans_.plan(graph);
  ensure(arena_, arena_size_, plan.size);
  last_plan_ = plan.size;
  last_naive_ = plan.naive_size;

  bind_arena(graph, plan, arena_.get(), name());

  const auto& nodes = graph.nodes();
  size_t work = 0;
  for (const Tensor* n : nodes) work = std::max(work, cpu_work_bytes(*n, n_threads_, graph.batch_invariant()));
  ensure(work_, work_size_, work);

  // The mul_mat_id nodes whose weights the pager holds (and where their experts are), and the
  // prefetch nodes it takes as hints.
  // The expert exchange's nodes, which thread 0 runs: sends (the team goes on) and receipts (the
  // team waits for them).
  std::vector<char> paged(nodes.size(), 0), hint(nodes.size(), 0), send(nodes.size(), 0), exchange(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    send[i] = nodes[i]->op == Op::kExpertSend;
    exchange[i] = nodes[i]->op == Op::kExpertExchange || nodes[i]->op == Op::kTokenGather;
  }
  if (pager_)
    for (size_t i = 0; i < nodes.size(); ++i) {
      const bool pages =
          (nodes[i]->op == Op::kMulMatId || nodes[i]->op == Op::kPrefetch) && pager_->pages(*nodes[i]->src[0]);
      (nodes[i]->op == Op::kPrefetch ? hint : paged)[i] = pages;
    }
  std::vector<const uint8_t*> slices;

  const int team = threads_for(graph);
  last_threads_ = team;
  last_barriers_ = 0;
  const bool profiling = cpu_profiling();
  profile_.threads = profiling ? team : 0;
  profile_.run.assign(profiling ? nodes.size() * team : 0, 0.0);
  profile_.wait.assign(profile_.run.size(), 0.0);
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  if (team == 1) {
    CpuBarrier none(1);
    CpuThread th;
    th.work = work_.get();
    th.work_bytes = work_size_;
    th.team_barrier = &none;
    th.batch_invariant = graph.batch_invariant();
    for (size_t i = 0; i < nodes.size(); ++i) {
      const bool timed = profiling && nodes[i]->op != Op::kView && nodes[i]->op != Op::kLeaf;
      const Clock::time_point start = timed ? Clock::now() : Clock::time_point{};
      if (paged[i]) acquire_experts(*nodes[i], slices);
      if (hint[i]) prefetch_experts(*nodes[i]);
      th.expert_slices = paged[i] ? slices.data() : nullptr;
      if (send[i])
        send_rows(*nodes[i]);
      else if (exchange[i])
        meet_others(*nodes[i]);
      else
        cpu_run_node(*nodes[i], th);
      if (timed) profile_.run[i] = seconds_since(start);
    }
    return;
  }
  std::vector<char> need_barrier = barriers_needed(graph, team);
  for (size_t i = 0; i < nodes.size(); ++i)
    need_barrier[i] |= paged[i] | send[i] | exchange[i];  // reading what came before
  for (char b : need_barrier) last_barriers_ += b;
  std::exception_ptr failed;  // what the pager or the expert exchange threw, on thread 0
  std::unique_ptr<CpuBarrier> barrier;
#pragma omp parallel num_threads(team)
  {
#pragma omp single
    barrier = std::make_unique<CpuBarrier>(omp_get_num_threads());
    // (the implicit barrier after `single` publishes it)
    CpuThread th;
    th.ith = omp_get_thread_num();
    th.nth = omp_get_num_threads();
    th.work = work_.get();
    th.work_bytes = work_size_;
    th.team_barrier = barrier.get();
    th.batch_invariant = graph.batch_invariant();
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Tensor* n = nodes[i];
      if (n->op == Op::kView || n->op == Op::kLeaf) continue;
      const Clock::time_point arrived = profiling ? Clock::now() : Clock::time_point{};
      if (need_barrier[i]) th.barrier();
      if (paged[i]) {
        if (th.ith == 0) {
          try {
            acquire_experts(*n, slices);
          } catch (...) {
            failed = std::current_exception();
          }
        }
        th.barrier();  // the slices are in place, or the pager failed: every thread stops
        if (failed) break;
      }
      if (hint[i] && th.ith == 0) prefetch_experts(*n);  // returns at once: no one waits for it
      if (send[i]) {  // the team goes on to the next nodes (failing, it stops at the receipt)
        if (th.ith == 0) {
          try {
            send_rows(*n);
          } catch (...) {
            failed = std::current_exception();
          }
        }
        continue;
      }
      if (exchange[i]) {
        const Clock::time_point start = profiling ? Clock::now() : Clock::time_point{};
        if (th.ith == 0 && !failed) {
          try {
            meet_others(*n);
          } catch (...) {
            failed = std::current_exception();
          }
        }
        if (profiling) profile_.run[i * team + th.ith] = seconds_since(start);
        th.barrier();  // the rows are complete, or the exchange failed: every thread stops
        if (failed) break;
        continue;
      }
      th.expert_slices = paged[i] ? slices.data() : nullptr;
      const Clock::time_point start = profiling ? Clock::now() : Clock::time_point{};
      cpu_run_node(*n, th);
      if (profiling) {
        profile_.wait[i * team + th.ith] = std::chrono::duration<double>(start - arrived).count();
        profile_.run[i * team + th.ith] = seconds_since(start);
      }
    }
  }
  if (failed) std::rethrow_exception(failed);
}

namespace {

// The distinct slices (experts) of w within `only` that ids i32 [k, T] name, in the order first
// named.
std::vector<int32_t> distinct_ids(const Tensor& w, const Tensor& ids, ExpertRange only = {}) {
  const int64_t E = w.ne[2];
  std::vector<char> named(static_cast<size_t>(E), 0);
  std::vector<int32_t> used;
  for (int64_t t = 0; t < ids.ne[1]; ++t)
    for (int64_t i = 0; i < ids.ne[0]; ++i)
      if (const int32_t e = ids.i32_row(t)[i]; e >= 0 && e < E && only.holds(e, E) && !named[e]) {
        named[e] = 1;
        used.push_back(e);
      }
  return used;
}

}  // namespace

// The distinct experts a mul_mat_id's ids name, from the pager: slices[e] for each.
void CpuBackend::acquire_experts(const Tensor& node, std::vector<const uint8_t*>& slices) const {
  const Tensor& w = *node.src[0];
  slices.assign(static_cast<size_t>(w.ne[2]), nullptr);
  pager_->acquire(w, distinct_ids(w, *node.src[2], expert_range(node)), slices);
}

ExpertExchange& CpuBackend::exchange_for(const Tensor& node) const {
  if (!exchange_)
    fail("{}: the graph meets other processes, but no exchange was given to the backend", op_name(node.op));
  return *exchange_;
}

void CpuBackend::send_rows(const Tensor& node) const {
  exchange_for(node).send(*node.src[0], *node.src[1], exchange_rows(node));
}

void CpuBackend::meet_others(const Tensor& node) const {
  ExpertExchange& exchange = exchange_for(node);
  Tensor& out = const_cast<Tensor&>(node);  // the node's own bytes, planned for it
  if (node.op == Op::kTokenGather) {
    const Tensor* mine = node.src[0];
    if (mine) std::memcpy(out.row(gather_first(node)), mine->data, mine->span_bytes());
    return exchange.gather(out, gather_first(node), mine ? mine->ne[1] : 0);
  }
  if (!node.src[2]) send_rows(node);  // no expert_send before it
  std::memcpy(out.data, node.src[0]->data, static_cast<size_t>(node.n_elements()) * sizeof(float));
  exchange.receive(out, *node.src[1], exchange_rows(node));
}

void CpuBackend::prefetch_experts(const Tensor& node) const {
  pager_->prefetch(*node.src[0], distinct_ids(*node.src[0], *node.src[1]));
}

// Fitted to DeepSeek-V2-Lite Q4_0 with 2 threads, where MLA's absorbed and naive prefill break even
// at ~240 tokens after 4096 cached ones (docs/cpu-speed.md, "Integer attention speedups"). A matrix
// product runs at 0.6 of the float attention kernel's multiply-adds per second with the integer
// GEMM and half that on the float path, which does half the integer GEMM's multiply-adds per cycle
// (for MLA's latent up-projections this includes the copies of latents and per-head keys that
// expanding costs). The integer attention kernels' speeds over the float ones are each set's
// measured figures (kernel_set.h).
double CpuBackend::matmul_speed(Type w, int64_t k) const { return int16_gemm().supports(w, k) ? 0.6 : 0.3; }

double CpuBackend::attention_speed(int64_t dk, int64_t dv, int64_t heads_per_kv) const {
  const CpuKernels& k = cpu_kernels();
  if (heads_per_kv == 1) return k.mha_int16_takes(dk, dv) ? k.mha_int16_speedup : 1.0;
  return k.grouped_int16_takes(dk, dv, heads_per_kv) ? k.grouped_int16_speedup : 1.0;
}

int physical_core_count() {
  // Distinct (package, core) pairs of the online CPUs; hyper-threads share a core id.
  std::set<std::pair<std::string, std::string>> cores;
  const unsigned n = std::thread::hardware_concurrency();
  for (unsigned cpu = 0; cpu < std::max(n, 1u) * 2; ++cpu) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream core(dir + "core_id"), package(dir + "physical_package_id");
    std::string c, p;
    if (!(core >> c) || !(package >> p)) continue;
    cores.emplace(p, c);
  }
  int count = static_cast<int>(cores.size());
  if (count <= 0) count = static_cast<int>(n);
  // Containers may expose more CPUs in sysfs than the process may use.
  count = std::min(count, std::max(1, omp_get_num_procs()));
  return std::max(count, 1);
}

}  // namespace ggl
