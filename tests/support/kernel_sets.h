// The CPU kernel sets (ggml-like/cpu/kernel_set.h) in the tests: running a test body once with each
// set this build has and this CPU runs, and what each set is meant to have, written down apart from
// the library (from docs/cpu-kernels.md and /proc/cpuinfo), so that a set that lost a path, or a
// set the dispatcher no longer offers, fails the tests instead of skipping them.
#pragma once
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ggml-like/cpu/kernel_set.h"

namespace latte::testing {

// Runs a test body once with each CPU kernel set this build has and this CPU runs in use, so every
// path is checked wherever it exists, and restores the set that was in use.
template <class Body>
void for_each_kernel_set(Body body) {
  const ggl::CpuKernels& before = ggl::cpu_kernels();
  for (const ggl::CpuKernels* k : ggl::runnable_cpu_kernels()) {
    ggl::set_cpu_kernels(*k);
    SCOPED_TRACE(std::string("kernel set ") + k->isa);
    body(*k);
  }
  ggl::set_cpu_kernels(before);
}

// The flags /proc/cpuinfo gives the first CPU ("flags" on x86, "Features" on ARM); empty where
// it has none for this architecture (qemu-user shows the host's file to an emulated ARM binary).
inline std::set<std::string> cpuinfo_flags() {
#if defined(__x86_64__) || defined(__i386__)
  const std::string key = "flags";
#elif defined(__aarch64__)
  const std::string key = "Features";
#else
  const std::string key = "";
#endif
  std::set<std::string> flags;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (!key.empty() && std::getline(in, line)) {
    if (line.rfind(key, 0) != 0 || line.find(':') == std::string::npos) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.insert(w);
    break;
  }
  return flags;
}

// The sets a build for this architecture has, best first, that a CPU with these flags runs
// (CMakeLists.txt LATTE_ISAS, and the instructions each set's compiler flags allow): on x86
// avx512 needs AVX-512 F/BW/VL/DQ/VNNI, avx2vnni AVX-VNNI, both AVX2/FMA/F16C/BMI2 as avx2 does,
// and generic runs anywhere; on aarch64 neon_dotprod needs the dot product instructions (asimddp)
// and neon runs on every ARMv8-A core.
inline std::vector<std::string> sets_for_flags(const std::set<std::string>& flags) {
  auto has = [&flags](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (!flags.count(n)) return false;
    return true;
  };
  std::vector<std::string> sets;
#if defined(__x86_64__) || defined(__i386__)
  const bool avx2 = has({"avx2", "fma", "f16c", "bmi2"});
  if (avx2 && has({"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"})) sets.push_back("avx512");
  if (avx2 && has({"avx_vnni"})) sets.push_back("avx2vnni");
  if (avx2) sets.push_back("avx2");
  sets.push_back("generic");
#elif defined(__aarch64__)
  if (has({"asimddp"})) sets.push_back("neon_dotprod");
  sets.push_back("neon");
#else
  sets.push_back("generic");
#endif
  return sets;
}

// The integer paths of the kernel sets, as docs/cpu-kernels.md gives them.
enum class IntPath {
  kInt16Gemm,        // 16-bit GEMM of Q4_0 / Q4_1 / Q8_0
  kInt16Unpacked,    // 16-bit GEMM of the K-quant / IQ4 / Q5 / i-quant types
  kInt8Gemm,         // 8-bit GEMM of Q4_0 / Q4_1
  kInt8KRows,        // 8-bit rows of the K-quant / IQ4 / Q5 types (routed experts of a decode step)
  kInterleavedRows,  // Q4_0_R8 / Q8_0_R8 / Q6_K_R8 rows
  kTransposedInt16,  // mul_mat_t of the block types (MLA's query absorption)
  kMhaInt16,         // MHA prefill attention
  kGroupedInt16,     // grouped-head attention (MLA's absorbed form) with 32 or more heads
};

inline const char* int_path_name(IntPath p) {
  switch (p) {
    case IntPath::kInt16Gemm: return "16-bit integer GEMM";
    case IntPath::kInt16Unpacked: return "K-quant / IQ4 / Q5 / i-quant 16-bit GEMM";
    case IntPath::kInt8Gemm: return "8-bit integer GEMM";
    case IntPath::kInt8KRows: return "K-quant / IQ4 / Q5 8-bit rows";
    case IntPath::kInterleavedRows: return "interleaved Q4_0 / Q8_0 / Q6_K rows";
    case IntPath::kTransposedInt16: return "16-bit transposed product";
    case IntPath::kMhaInt16: return "integer MHA attention";
    case IntPath::kGroupedInt16: return "integer MLA attention";
  }
  return "?";
}

// The set a build's set stands for: a native build (LATTE_NATIVE) is the best set of this CPU.
inline std::string set_meant(std::string_view isa) {
  if (isa != "native") return std::string(isa);
  const std::vector<std::string> best = sets_for_flags(cpuinfo_flags());
  return best.front();
}

// Whether set `isa` is meant to have path p: the x86 SIMD sets have every path (the grouped-head
// attention only avx512, the one with enough registers for it); the NEON sets the 16-bit and
// 8-bit GEMMs of Q4_0 / Q4_1 / Q8_0 and the 16-bit one of the other types (their attention stays
// float32); generic none.
inline bool set_should_have(std::string_view isa, IntPath p) {
  const std::string set = set_meant(isa);
  const bool x86 = set == "avx512" || set == "avx2vnni" || set == "avx2";
  const bool neon = set == "neon_dotprod" || set == "neon";
  switch (p) {
    case IntPath::kInt16Gemm:
    case IntPath::kInt16Unpacked:
    case IntPath::kInt8Gemm: return x86 || neon;
    case IntPath::kInt8KRows:
    case IntPath::kInterleavedRows:
    case IntPath::kTransposedInt16:
    case IntPath::kMhaInt16: return x86;
    case IntPath::kGroupedInt16: return set == "avx512";
  }
  return false;
}

}  // namespace latte::testing

// In a test of one kernel set `kernels` (a CpuKernels): where the set lacks path `path`
// (`present` false), fails if the set is meant to have it, else skips naming the reason. A set
// without a path runs the float path, so a quiet return there would pass having checked nothing.
#define LATTE_REQUIRE_INT_PATH(kernels, path, present)                                       \
  do {                                                                                       \
    if (!(present)) {                                                                        \
      if (::latte::testing::set_should_have((kernels).isa, (path))) {                        \
        FAIL() << (kernels).isa << " has no " << ::latte::testing::int_path_name(path)       \
               << ", which it is meant to have (docs/cpu-kernels.md)";                       \
      } else {                                                                               \
        GTEST_SKIP() << (kernels).isa << " has no " << ::latte::testing::int_path_name(path) \
                     << " (not meant to: the float path runs)";                              \
      }                                                                                      \
    }                                                                                        \
  } while (0)
