// The CPU kernels of one instruction set as a table, and the choice of the table a process uses.
// The kernels are written once (cpu/simd/) and compiled once per instruction set the build targets
// (x86: avx512 = AVX-512 F/BW/VL/DQ/VNNI, avx2 = AVX2/FMA/F16C, generic = the baseline; aarch64:
// neon_dotprod = ARMv8.2-A with the dot product instructions, neon = ARMv8-A; or native =
// the build machine only, with LATTE_NATIVE). At start-up the best set this CPU runs is chosen
// from CPUID (x86) or the auxiliary vector (aarch64); the environment variable LATTE_CPU=<set> picks another one that the CPU can run.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ggml-like/core/types.h"

namespace ggl {

struct Tensor;
struct CpuThread;
struct IntGemm;

struct CpuKernels {
  const char* isa;  // the set's name: "avx512", "avx2", "generic", "native", ...
  // The float32 path (dot.h).
  float (*dot_row)(Type t, const void* w_row, const float* x, int64_t n);
  void (*matmul)(Type t, const void* w, int64_t rows, int64_t n, const float* x, int64_t x_stride, int64_t n_cols,
                 float* y, int64_t y_stride, int64_t row_begin, int64_t row_end);
  void (*decode_row)(Type t, const void* w_row, float* out, int64_t n);
  // Every op: scratch bytes of a node, and running it (op_thread.h).
  size_t (*node_work_bytes)(const Tensor& node, int n_threads, bool batch_invariant);
  void (*run_node)(const Tensor& node, const CpuThread& th);
  // Whether MHA prefill attention takes 16-bit integers, and whether a flash_attn node does (MHA
  // prefill or grouped heads; attention_int16.h).
  bool (*mha_int16_takes)(int64_t Dk, int64_t Dv);
  bool (*attention_int16_applies)(const Tensor& dst);
  // How many times faster than the set's float32 MHA kernel the integer one runs (measured; 0
  // where the set has none): the MLA prefill-form choice weighs the naive form's attention by it.
  // Each set's figures: docs/cpu-speed.md, "Integer attention speedups".
  double mha_int16_speedup;
  // The same for grouped heads (MLA's absorbed attention): whether that many heads per KV head of
  // these sizes take the integer kernel, and its measured speed over the float one there.
  bool (*grouped_int16_takes)(int64_t Dk, int64_t Dv, int64_t heads);
  double grouped_int16_speedup;
  // The integer GEMMs (int_gemm.h); a set without them has ones that support nothing.
  const IntGemm* int16;
  const IntGemm* int8;
  // The K-quant / IQ4 / Q5 types' 8-bit products, rows path only (gemm_kquant.cpp): Q8_K
  // activations for the super-block types, Q8_0 activations for Q5_0 / Q5_1 / IQ4_NL.
  const IntGemm* int8_k;
  const IntGemm* int8_b32;
};

// The table in use.
const CpuKernels& cpu_kernels();
// Every set this build has that this CPU can run, best first.
std::vector<const CpuKernels*> runnable_cpu_kernels();
// Makes `k` the table in use (tests force each path with it; never while a graph runs).
void set_cpu_kernels(const CpuKernels& k);
// One line on what runs: the set, and which integer paths it has ("avx512: integer GEMMs (16-bit,
// 8-bit), integer MHA attention"), for `latte bench` and `latte info --system`.
std::string describe_cpu_kernels(const CpuKernels& k);

}  // namespace ggl
