// The kernels written once in cpu/simd/ and compiled once per instruction set. CMake builds one
// object library per set, each with that set's compiler flags and GGL_ISA naming it; every copy
// lives in namespace ggl::<set> (ggl::avx512, ggl::avx2, ggl::generic, ...), so the copies never
// meet at link time, and cpu/dispatch.cpp collects each set's copies into its CpuKernels table.
// What differs between sets is only the innermost steps, taken from cpu/arch/<family>/<set>/ under
// the compiler's own instruction-set macros.
//
// These files must not include the dispatching declarations of dot.h or attention_int16.h: a
// call inside ggl::<set> would then also find the ggl:: function of the same signature through
// its arguments' namespace, and be ambiguous.
#pragma once
#ifndef GGL_ISA
#error "cpu/simd/ files are compiled once per instruction set, with GGL_ISA naming the set"
#endif
#include <cstddef>
#include <cstdint>

#include "ggml-like/core/types.h"
#include "ggml-like/cpu/op_thread.h"
#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/cpu/kernel_set.h"
#include "ggml-like/cpu/path_counts.h"

namespace ggl::GGL_ISA {

// dot.cpp: the float32 path (dot.h has the meaning of each).
float dot_row(Type t, const void* w_row, const float* x, int64_t n);
void matmul(Type t, const void* w, int64_t rows, int64_t n, const float* x, int64_t x_stride, int64_t n_cols, float* y,
            int64_t y_stride, int64_t row_begin, int64_t row_end);
void decode_row(Type t, const void* w_row, float* out, int64_t n);
// y[c][0, n) += sum over k < K of a[c][k] * (row k of w, rows row_stride bytes apart) for the
// n_cols columns c: the transposed product (mul_mat_t), with nothing decoded to memory.
void add_weighted_rows(Type t, const void* w, size_t row_stride, int64_t K, int64_t n, const float* const* a,
                       float* const* y, int n_cols);
// transposed_int16.cpp: the same for Q4_0 / Q8_0 weights in 16-bit integers, where the set has
// the steps; false (nothing done) for other types and sets.
bool add_weighted_rows_int16(Type t, const void* w, size_t row_stride, int64_t K, int64_t n, const float* const* a,
                             float* const* y, int n_cols);

// node.cpp: scratch bytes of a node and running it (op_thread.h's cpu_work_bytes, cpu_run_node).
size_t node_work_bytes(const Tensor& node, int n_threads, bool batch_invariant);
void run_node(const Tensor& node, const CpuThread& th);

// The op kernels: every thread of the team calls one with the same node (op_thread.h).
// op_elementwise.cpp
void cpu_rms_norm(const Tensor& dst, const CpuThread& th);
void cpu_binary(const Tensor& dst, const CpuThread& th);  // add, mul, div
void cpu_unary(const Tensor& dst, const CpuThread& th);   // scale, sigmoid, silu
void cpu_swiglu(const Tensor& dst, const CpuThread& th);
void cpu_sum_rows(const Tensor& dst, const CpuThread& th);
void cpu_softmax(const Tensor& dst, const CpuThread& th);
// op_matmul.cpp
size_t cpu_mul_mat_work(const Tensor& dst, int n_threads, bool batch_invariant);
void cpu_mul_mat(const Tensor& dst, const CpuThread& th);
void cpu_mul_mat_t(const Tensor& dst, const CpuThread& th);
size_t cpu_mul_mat_id_work(const Tensor& dst, int n_threads, bool batch_invariant);
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
// op_attention.cpp (MHA prefill and grouped heads may take attention_int16.cpp)
size_t cpu_flash_attn_work(const Tensor& dst, int n_threads, bool batch_invariant);
void cpu_flash_attn(const Tensor& dst, const CpuThread& th);

// attention_int16.cpp: MHA prefill and grouped-head attention on 16-bit integers (attention_int16.h).
bool mha_int16_takes(int64_t Dk, int64_t Dv);
bool grouped_int16_takes(int64_t Dk, int64_t Dv, int64_t heads);
bool attention_int16_applies(const Tensor& dst);
size_t attention_int16_work(const Tensor& dst, int n_threads, bool batch_invariant);
void attention_int16(const Tensor& dst, const CpuThread& th);
extern const double kMhaInt16Speedup;
extern const double kGroupedInt16Speedup;

// gemm_int16.cpp, gemm_int8.cpp (int_gemm.h).
extern const IntGemm kInt16Gemm;
extern const IntGemm kInt8Gemm;
// gemm_kquant.cpp (int_gemm.h; rows path only).
extern const IntGemm kInt8KGemm;
extern const IntGemm kInt8B32Gemm;

// kernels.cpp: this set's table.
extern const CpuKernels kKernels;

// node.cpp: this set's counts of the nodes it ran and the integer paths they took
// (path_counts.h), and counting one node on a path: every thread of the team calls it, the first
// counts.
extern CpuPathCounters g_path_counters;
inline void count_path(CpuPath p, const CpuThread& th) {
  if (th.ith == 0) g_path_counters[static_cast<size_t>(p)].fetch_add(1, std::memory_order_relaxed);
}

}  // namespace ggl::GGL_ISA
