// The choice of kernel table (kernel_set.h), and the ggl:: entry points of the kernels, which forward
// to the table in use. Compiled for the baseline: this file runs before anything is known about
// the CPU, so it must not use any instruction set it checks for.
#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ggml-like/core/error.h"
#include "ggml-like/cpu/attention_int16.h"
#include "ggml-like/cpu/op_thread.h"
#include "ggml-like/cpu/dot.h"
#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/cpu/interleaved.h"
#include "ggml-like/cpu/kernel_set.h"
#include "ggml-like/cpu/path_counts.h"

#if defined(__x86_64__) || defined(__i386__)
#include "ggml-like/cpu/arch/x86/cpu_features.h"
#elif defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

// The sets this build has, best first: CMake defines GGL_ISA_LIST as X(set) for each
// (CMakeLists.txt, LATTE_ISAS).
#ifndef GGL_ISA_LIST
#error "GGL_ISA_LIST names the kernel sets of this build (CMakeLists.txt)"
#endif
#define X(isa)                            \
  namespace ggl::isa {                    \
  extern const CpuKernels kKernels;       \
  extern CpuPathCounters g_path_counters; \
  }
GGL_ISA_LIST
#undef X

namespace ggl {
namespace {

// Whether this CPU runs a set: the instructions its compiler flags allow (CMakeLists.txt,
// LATTE_ISA_FLAGS_<set>).
#if defined(__x86_64__) || defined(__i386__)
bool cpu_runs(std::string_view set) {
  static const x86::CpuFeatures cpu = x86::cpu_features();
  if (set == "avx512") return cpu.avx512;
  if (set == "avx2vnni") return cpu.avx_vnni;
  if (set == "avx2") return cpu.avx2;
  return set == "generic" || set == "native";  // the baseline, or built for this machine
}
#elif defined(__aarch64__)
// Linux reports the CPU's optional features in the auxiliary vector (what the kernel enabled, so
// also what an emulator offers). Advanced SIMD itself is part of every ARMv8-A core.
bool cpu_runs(std::string_view set) {
  if (set == "neon_dotprod") return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
  return set == "neon" || set == "generic" || set == "native";
}
#else
bool cpu_runs(std::string_view set) { return set == "generic" || set == "native"; }
#endif

// Every set of this build, best first.
std::vector<const CpuKernels*> built_sets() {
  std::vector<const CpuKernels*> all;
#define X(isa) all.push_back(&isa::kKernels);
  GGL_ISA_LIST
#undef X
  return all;
}

std::string names(const std::vector<const CpuKernels*>& sets) {
  std::string s;
  for (const CpuKernels* k : sets) s += (s.empty() ? "" : ", ") + std::string(k->isa);
  return s;
}

// The best runnable set, or the one LATTE_CPU names.
const CpuKernels* initial_choice() {
  const std::vector<const CpuKernels*> runnable = runnable_cpu_kernels();
  const char* wanted = std::getenv("LATTE_CPU");
  if (wanted == nullptr || *wanted == '\0') return runnable.front();
  for (const CpuKernels* k : runnable)
    if (std::string_view(k->isa) == wanted) return k;
  fail("LATTE_CPU={}: not a kernel set this build has and this CPU runs (it runs: {})", wanted, names(runnable));
}

std::atomic<const CpuKernels*> g_chosen{nullptr};

}  // namespace

std::vector<const CpuKernels*> runnable_cpu_kernels() {
  std::vector<const CpuKernels*> runnable;
  for (const CpuKernels* k : built_sets())
    if (cpu_runs(k->isa)) runnable.push_back(k);
  return runnable;
}

const CpuKernels& cpu_kernels() {
  const CpuKernels* k = g_chosen.load(std::memory_order_acquire);
  if (k != nullptr) return *k;
  static const CpuKernels* const first = initial_choice();  // thread-safe, once
  const CpuKernels* expected = nullptr;
  g_chosen.compare_exchange_strong(expected, first, std::memory_order_acq_rel);
  return *g_chosen.load(std::memory_order_acquire);
}

void set_cpu_kernels(const CpuKernels& k) { g_chosen.store(&k, std::memory_order_release); }

std::string describe_cpu_kernels(const CpuKernels& k) {
  std::string paths;
  auto add = [&paths](const char* what) { paths += (paths.empty() ? "" : ", ") + std::string(what); };
  if (k.int16->supports(Type::Q4_0, kQuantBlock)) add("16-bit integer GEMMs");
  if (k.int16->supports(Type::Q4_K, kSuperBlock)) add("K-quant / IQ4 / Q5 16-bit GEMMs");
  if (k.int8->supports(Type::Q4_0, kQuantBlock)) add("8-bit integer GEMMs");
  if (k.int8_k->supports(Type::Q4_K, kSuperBlock)) add("K-quant integer rows");
  if (k.int16->supports(kQ8_0_R8, kQuantBlock)) add("interleaved Q4_0 / Q8_0 / Q6_K rows");
  if (k.mha_int16_takes(128, 128)) add("integer MHA attention");
  if (k.grouped_int16_takes(576, 512, 128)) add("integer MLA attention");
  return std::string(k.isa) + " kernels: " + (paths.empty() ? "float32 paths only" : paths);
}

CpuPathCounts cpu_path_counts(const CpuKernels& k) {
  CpuPathCounts counts;
  const CpuPathCounters* own = nullptr;
#define X(isa) \
  if (&k == &isa::kKernels) own = &isa::g_path_counters;
  GGL_ISA_LIST
#undef X
  if (own != nullptr)
    for (size_t i = 0; i < kCpuPathCount; ++i) counts.n[i] = (*own)[i].load(std::memory_order_relaxed);
  return counts;
}

// ---- The ggl:: entry points, forwarding to the table in use. ----

float dot_row(Type t, const void* w_row, const float* x, int64_t n) { return cpu_kernels().dot_row(t, w_row, x, n); }

void matmul(Type t, const void* w, int64_t rows, int64_t n, const float* x, int64_t x_stride, int64_t n_cols, float* y,
            int64_t y_stride, int64_t row_begin, int64_t row_end) {
  cpu_kernels().matmul(t, w, rows, n, x, x_stride, n_cols, y, y_stride, row_begin, row_end);
}

void matvec(Type t, const void* w, int64_t rows, int64_t n, const float* x, float* y) {
  matmul(t, w, rows, n, x, n, 1, y, rows, 0, rows);
}

void decode_row(Type t, const void* w_row, float* out, int64_t n) { cpu_kernels().decode_row(t, w_row, out, n); }

size_t cpu_work_bytes(const Tensor& node, int n_threads, bool batch_invariant) {
  return cpu_kernels().node_work_bytes(node, n_threads, batch_invariant);
}

void cpu_run_node(const Tensor& node, const CpuThread& th) { cpu_kernels().run_node(node, th); }

bool mha_int16_takes(int64_t Dk, int64_t Dv) { return cpu_kernels().mha_int16_takes(Dk, Dv); }

bool attention_int16_applies(const Tensor& dst) { return cpu_kernels().attention_int16_applies(dst); }

const IntGemm& int16_gemm() { return *cpu_kernels().int16; }

}  // namespace ggl
