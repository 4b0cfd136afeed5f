// CPU kernels of the graph ops. Every kernel is called by every thread of the team with the same
// node; it computes its own share (split_range) and writes only that share. Scratch space comes
// from the shared work buffer (size requested by cpu_work_bytes). Kernels never throw: shapes and
// types were validated when the graph was built.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>

#include "ggml-like/core/tensor.h"

namespace ggl {

class CpuBarrier;

struct CpuThread {
  int ith = 0;
  int nth = 1;
  uint8_t* work = nullptr;  // shared by the team
  size_t work_bytes = 0;
  CpuBarrier* team_barrier = nullptr;
  // The graph is batch-invariant (graph.h): kernels take the paths whose results per token do not
  // depend on the number of tokens or threads.
  bool batch_invariant = false;
  // Where a mul_mat_id's expert e starts when its weights are paged (backend/paged_weights.h),
  // for the node being run; nullptr: at the weights' data, e * nb[2] on.
  const uint8_t* const* expert_slices = nullptr;

  // Every thread of the team must call it.
  void barrier() const;
  // This thread's slice of a per-thread scratch area of `per_thread` bytes starting at `offset`.
  template <class T>
  T* scratch(size_t per_thread, size_t offset = 0) const {
    return reinterpret_cast<T*>(work + offset + static_cast<size_t>(ith) * per_thread);
  }
};

// Bytes of scratch with room for alignment: kernels round per-thread areas to this.
inline constexpr size_t kScratchAlign = 64;
inline size_t scratch_size(size_t bytes) { return (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

// [begin, end) of n items for thread ith of nth (contiguous, balanced).
inline std::pair<int64_t, int64_t> split_range(int64_t n, int ith, int nth) {
  const int64_t per = n / nth, extra = n % nth;
  const int64_t begin = ith * per + (ith < extra ? ith : extra);
  return {begin, begin + per + (ith < extra ? 1 : 0)};
}

// Scratch bytes a node needs for a team of n_threads, and running it, with the kernel set in use
// (kernel_set.h; the op kernels themselves are in cpu/simd/, compiled once per instruction set).
size_t cpu_work_bytes(const Tensor& node, int n_threads, bool batch_invariant = false);
void cpu_run_node(const Tensor& node, const CpuThread& th);
// Rough multiply-add count of a node (decides how many threads a graph is worth).
double cpu_node_cost(const Tensor& node);

}  // namespace ggl
