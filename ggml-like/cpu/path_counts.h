// Which CPU kernels ran: per kernel set (kernel_set.h), how many graph nodes its kernels ran and
// how many of those took each integer path. Each set's copy of the kernels (cpu/simd/) counts its
// own nodes, so the counts say whose code ran, not which table was in use; tests read them to
// prove that a loop over the sets ran every set, and on which path a product went. The cost is
// one relaxed atomic increment per node and path, by the first thread of the team.
#pragma once
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ggl {

struct CpuKernels;

enum class CpuPath : int {
  kNode,             // any node the set's kernels ran
  kInt16Gemm,        // mul_mat / mul_mat_id on the set's 16-bit integer GEMM (CpuKernels::int16)
  kInt8Gemm,         // ... on its 8-bit GEMM (CpuKernels::int8)
  kInt8KRows,        // ... on its K-quant 8-bit rows (CpuKernels::int8_k)
  kInt8B32Rows,      // ... on its Q5_0 / Q5_1 / IQ4_NL 8-bit rows (CpuKernels::int8_b32)
  kTransposedInt16,  // mul_mat_t of Q4_0 / Q8_0 in 16-bit integers (cpu/simd/transposed_int16.cpp)
  kAttentionInt16,   // flash_attn on 16-bit integers (attention_int16.h)
  kCount
};
inline constexpr size_t kCpuPathCount = static_cast<size_t>(CpuPath::kCount);

// One set's counters (each set defines its own, cpu/simd/node.cpp).
using CpuPathCounters = std::array<std::atomic<uint64_t>, kCpuPathCount>;

struct CpuPathCounts {
  std::array<uint64_t, kCpuPathCount> n{};
  uint64_t operator[](CpuPath p) const { return n[static_cast<size_t>(p)]; }
};

// What set k's kernels have counted since the process started.
CpuPathCounts cpu_path_counts(const CpuKernels& k);

}  // namespace ggl
