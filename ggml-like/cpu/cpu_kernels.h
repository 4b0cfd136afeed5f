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

// Dispatch: scratch bytes a node needs for a team of n_threads, and running it.
size_t cpu_work_bytes(const Tensor& node, int n_threads);
// Rough multiply-add count of a node (decides how many threads a graph is worth).
double cpu_node_cost(const Tensor& node);
void cpu_run_node(const Tensor& node, const CpuThread& th);

// op_elementwise.cpp
void cpu_rms_norm(const Tensor& dst, const CpuThread& th);
void cpu_binary(const Tensor& dst, const CpuThread& th);  // add, mul, div
void cpu_unary(const Tensor& dst, const CpuThread& th);   // scale, sigmoid, silu
void cpu_swiglu(const Tensor& dst, const CpuThread& th);
void cpu_sum_rows(const Tensor& dst, const CpuThread& th);
void cpu_softmax(const Tensor& dst, const CpuThread& th);
// op_matmul.cpp
size_t cpu_mul_mat_work(const Tensor& dst, int n_threads);
void cpu_mul_mat(const Tensor& dst, const CpuThread& th);
size_t cpu_mul_mat_t_work(const Tensor& dst, int n_threads);
void cpu_mul_mat_t(const Tensor& dst, const CpuThread& th);
size_t cpu_mul_mat_id_work(const Tensor& dst, int n_threads);
void cpu_mul_mat_id(const Tensor& dst, const CpuThread& th);
// op_rope.cpp
size_t cpu_rope_work(const Tensor& dst, int n_threads);
void cpu_rope(const Tensor& dst, const CpuThread& th);
// op_topk.cpp
size_t cpu_top_k_work(const Tensor& dst, int n_threads);
void cpu_top_k(const Tensor& dst, const CpuThread& th);
// op_rows.cpp
void cpu_get_rows(const Tensor& dst, const CpuThread& th);
void cpu_concat(const Tensor& dst, const CpuThread& th);
void cpu_cont(const Tensor& dst, const CpuThread& th);
void cpu_copy(const Tensor& dst, const CpuThread& th);
// op_attention.cpp
size_t cpu_flash_attn_work(const Tensor& dst, int n_threads);
void cpu_flash_attn(const Tensor& dst, const CpuThread& th);

}  // namespace ggl
