// Which CPU kernel sets and integer paths the tests exercise, each held to an expectation derived
// apart from the library: the sets this CPU runs from /proc/cpuinfo's flags, the paths each set has
// from docs/cpu-kernels.md (tests/support/kernel_sets.h). Then that the kernel tests' loops reach
// every one of those sets: for_each_kernel_set runs each set's own kernels, on the integer paths
// the set is meant to have (read from the sets' own counts, ggml-like/cpu/path_counts.h), and the
// parameterised PerKernelSet tests (test_gemm_int.cpp) are instantiated for each.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/cpu/kernel_set.h"
#include "ggml-like/cpu/path_counts.h"
#include "ggml-like/graph/graph.h"
#include "tests/support/kernel_sets.h"
#include "tests/support/random_floats.h"

namespace test_kernel_coverage {

using ggl::CpuPath;
using ggl::Graph;
using ggl::Tensor;
using ggl::Type;
using latte::testing::IntPath;
using latte::testing::set_should_have;

std::vector<std::string> names(const std::vector<const ggl::CpuKernels*>& sets) {
  std::vector<std::string> out;
  for (const ggl::CpuKernels* k : sets) out.push_back(k->isa);
  return out;
}

// The sets this build should offer on this CPU, or nothing where that cannot be told (with why).
// A native build (LATTE_NATIVE) has its one set. Under qemu-user, /proc/cpuinfo is the host's: an
// emulated ARM CPU is known by the -cpu the tests run under (LATTE_EMULATOR).
std::optional<std::vector<std::string>> expected_sets(std::string* why) {
  const std::vector<std::string> built = names(ggl::runnable_cpu_kernels());
  if (built == std::vector<std::string>{"native"}) return built;
  const std::set<std::string> flags = latte::testing::cpuinfo_flags();
  if (!flags.empty()) return latte::testing::sets_for_flags(flags);
#if defined(__aarch64__)
  std::smatch m;
  const std::string emulator = LATTE_EMULATOR;
  if (std::regex_search(emulator, m, std::regex("-cpu ([a-z0-9-]+)"))) {
    const std::string cpu = m[1];
    if (cpu == "max" || cpu == "cortex-a76" || cpu == "neoverse-n1" || cpu == "a64fx")
      return std::vector<std::string>{"neon_dotprod", "neon"};
    if (cpu == "cortex-a53" || cpu == "cortex-a57" || cpu == "cortex-a72") return std::vector<std::string>{"neon"};
    *why = "qemu-aarch64 -cpu " + cpu + ": not a CPU this test knows the features of";
    return std::nullopt;
  }
#endif
  *why = "/proc/cpuinfo names no CPU features for this architecture";
  return std::nullopt;
}

TEST(KernelCoverage, RunnableSetsAreTheOnesProcCpuinfoNames) {
  std::string why;
  const auto expected = expected_sets(&why);
  if (!expected) GTEST_SKIP() << why;
  EXPECT_EQ(names(ggl::runnable_cpu_kernels()), *expected);
}

// The line `latte bench` and `latte info --system` print for each set: its integer paths, exactly
// those it is meant to have, in describe_cpu_kernels' order.
TEST(KernelCoverage, EachSetNamesTheIntegerPathsItIsMeantToHave) {
  const std::pair<IntPath, const char*> phrases[] = {
      {IntPath::kInt16Gemm, "16-bit integer GEMMs"},
      {IntPath::kInt16Unpacked, "K-quant / IQ4 / Q5 16-bit GEMMs"},
      {IntPath::kInt8Gemm, "8-bit integer GEMMs"},
      {IntPath::kInt8KRows, "K-quant integer rows"},
      {IntPath::kInterleavedRows, "interleaved Q4_0 / Q8_0 / Q6_K rows"},
      {IntPath::kMhaInt16, "integer MHA attention"},
      {IntPath::kGroupedInt16, "integer MLA attention"},
  };
  for (const ggl::CpuKernels* k : ggl::runnable_cpu_kernels()) {
    std::string paths;
    for (const auto& [path, phrase] : phrases) {
      if (!set_should_have(k->isa, path)) continue;
      if (!paths.empty()) paths += ", ";
      paths += phrase;
    }
    EXPECT_EQ(ggl::describe_cpu_kernels(*k),
              std::string(k->isa) + " kernels: " + (paths.empty() ? "float32 paths only" : paths));
  }
}

// What a graph's run added to each set's counts.
using Deltas = std::map<std::string, ggl::CpuPathCounts>;

Deltas run_counted(Graph& g, Tensor* out) {
  std::map<std::string, ggl::CpuPathCounts> before;
  for (const ggl::CpuKernels* k : ggl::runnable_cpu_kernels()) before[k->isa] = ggl::cpu_path_counts(*k);
  g.mark_output(out);
  ggl::CpuBackend(2).compute(g);
  Deltas d;
  for (const ggl::CpuKernels* k : ggl::runnable_cpu_kernels()) {
    const ggl::CpuPathCounts now = ggl::cpu_path_counts(*k);
    for (size_t i = 0; i < ggl::kCpuPathCount; ++i) d[k->isa].n[i] = now.n[i] - before[k->isa].n[i];
  }
  return d;
}

// Expects that only set `isa`'s kernels ran, and that they took `path` exactly `count` times.
void expect_ran(const Deltas& d, const std::string& isa, CpuPath path, uint64_t count, std::string_view what) {
  SCOPED_TRACE(std::string(what));
  for (const auto& [set, counts] : d) {
    if (set != isa) {
      EXPECT_EQ(counts[CpuPath::kNode], 0u) << set << "'s kernels ran while " << isa << " was in use";
      continue;
    }
    EXPECT_GT(counts[CpuPath::kNode], 0u) << isa << "'s kernels did not run";
    for (CpuPath p : {CpuPath::kInt16Gemm, CpuPath::kInt8Gemm, CpuPath::kInt8KRows, CpuPath::kInt8B32Rows,
                      CpuPath::kTransposedInt16, CpuPath::kAttentionInt16})
      EXPECT_EQ(counts[p], p == path ? count : 0u) << isa << ", path " << static_cast<int>(p);
  }
}

std::vector<uint8_t> weights(Type t, int64_t n, int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  return latte::testing::quantized_rows(t, rows, n, rng, normal).bytes;
}

// Routed experts: 4 experts of rows of n, `tokens` tokens with 2 experts each.
struct Experts {
  std::vector<uint8_t> w;
  std::vector<float> x;
  std::vector<int32_t> ids;
  Tensor* product(Graph& g, Type t, int64_t n, int64_t tokens) {
    const int64_t rows = 16, experts = 4;
    w = weights(t, n, rows * experts, 3);
    x = latte::testing::random_floats(n * tokens, 4);
    ids.clear();
    for (int64_t i = 0; i < tokens; ++i)
      ids.insert(ids.end(), {static_cast<int32_t>(i % 4), static_cast<int32_t>((i + 1) % 4)});
    return g.mul_mat_id(g.external(t, std::vector<int64_t>{n, rows, experts}, w.data(), "w"),
                        g.external(Type::F32, std::vector<int64_t>{n, 1, tokens}, x.data(), "x"),
                        g.external(Type::I32, std::vector<int64_t>{2, tokens}, ids.data(), "ids"));
  }
};

// Each set the loop visits runs its own kernels (and no other set's), on each integer path exactly
// where the set is meant to have it; the loop visits every set this CPU runs, and restores the set
// that was in use.
TEST(KernelCoverage, ForEachKernelSetRunsEverySetOnItsIntegerPaths) {
  const ggl::CpuKernels& in_use = ggl::cpu_kernels();
  std::vector<std::string> visited;
  latte::testing::for_each_kernel_set([&](const ggl::CpuKernels& set) {
    visited.push_back(set.isa);
    EXPECT_EQ(&ggl::cpu_kernels(), &set);
    const std::string isa = set.isa;
    auto has = [&](IntPath p) { return set_should_have(isa, p); };
    {  // A prefill product: 8 columns through the 16-bit GEMM's panels.
      Graph g;
      const std::vector<uint8_t> w = weights(Type::Q8_0, 64, 32, 1);
      std::vector<float> x = latte::testing::random_floats(64 * 8, 2);
      Tensor* out = g.mul_mat(g.external(Type::Q8_0, std::vector<int64_t>{64, 32}, w.data(), "w"),
                              g.external(Type::F32, std::vector<int64_t>{64, 8}, x.data(), "x"));
      expect_ran(run_counted(g, out), isa, CpuPath::kInt16Gemm, has(IntPath::kInt16Gemm) ? 1 : 0, "Q8_0 mul_mat");
    }
    {  // Routed experts with 4-bit weights: 8-bit activations.
      Graph g;
      Experts e;
      Tensor* out = e.product(g, Type::Q4_0, 64, 3);
      expect_ran(run_counted(g, out), isa, CpuPath::kInt8Gemm, has(IntPath::kInt8Gemm) ? 1 : 0, "Q4_0 experts");
    }
    // A decode step's routed experts with K-quant and Q5 weights: the 8-bit rows where the set has
    // them, else the 16-bit GEMM of these types.
    for (const auto& [t, n, rows_path] : {std::tuple{Type::Q4_K, int64_t{256}, CpuPath::kInt8KRows},
                                          std::tuple{Type::Q5_0, int64_t{64}, CpuPath::kInt8B32Rows}}) {
      Graph g;
      Experts e;
      Tensor* out = e.product(g, t, n, 2);
      const bool rows = has(IntPath::kInt8KRows), unpacked = has(IntPath::kInt16Unpacked);
      expect_ran(run_counted(g, out), isa, rows ? rows_path : CpuPath::kInt16Gemm, rows || unpacked ? 1 : 0,
                 ggl::type_name(t));
    }
    {  // MLA's query absorption: the transposed product.
      Graph g;
      const std::vector<uint8_t> w = weights(Type::Q8_0, 64, 32, 5);
      std::vector<float> x = latte::testing::random_floats(32 * 2, 6);
      Tensor* out = g.mul_mat_t(g.external(Type::Q8_0, std::vector<int64_t>{64, 32}, w.data(), "w"),
                                g.external(Type::F32, std::vector<int64_t>{32, 2}, x.data(), "x"));
      expect_ran(run_counted(g, out), isa, CpuPath::kTransposedInt16, has(IntPath::kTransposedInt16) ? 1 : 0,
                 "Q8_0 mul_mat_t");
    }
    // Attention: an MHA prefill of 8 tokens on float32 K and V, and 32 heads on one KV head (MLA's
    // absorbed form) with an F16 cache.
    for (const auto& [heads, kv_heads, tokens, kv_type, path] :
         {std::tuple{int64_t{2}, int64_t{2}, int64_t{8}, Type::F32, IntPath::kMhaInt16},
          std::tuple{int64_t{32}, int64_t{1}, int64_t{1}, Type::F16, IntPath::kGroupedInt16}}) {
      const int64_t Dk = 64, Dv = 32, keys = 40;
      Graph g;
      std::vector<float> q = latte::testing::random_floats(Dk * heads * tokens, 7);
      const std::vector<float> k = latte::testing::random_floats(Dk * kv_heads * keys, 8);
      const std::vector<float> v = latte::testing::random_floats(Dv * kv_heads * keys, 9);
      std::vector<uint8_t> kb(ggl::row_bytes(kv_type, Dk) * kv_heads * keys),
          vb(ggl::row_bytes(kv_type, Dv) * kv_heads * keys);
      for (int64_t r = 0; r < kv_heads * keys; ++r) {
        ggl::quantize_row(kv_type, k.data() + r * Dk, kb.data() + r * ggl::row_bytes(kv_type, Dk), Dk);
        ggl::quantize_row(kv_type, v.data() + r * Dv, vb.data() + r * ggl::row_bytes(kv_type, Dv), Dv);
      }
      std::vector<int32_t> pos(tokens);
      for (int64_t t = 0; t < tokens; ++t) pos[t] = static_cast<int32_t>(keys - tokens + t);
      Tensor* out = g.flash_attn(g.external(Type::F32, std::vector<int64_t>{Dk, heads, tokens}, q.data(), "q"),
                                 g.external(kv_type, std::vector<int64_t>{Dk, kv_heads, keys}, kb.data(), "k"),
                                 g.external(kv_type, std::vector<int64_t>{Dv, kv_heads, keys}, vb.data(), "v"),
                                 g.input_i32(pos, "pos"), 0.125f);
      expect_ran(run_counted(g, out), isa, CpuPath::kAttentionInt16, has(path) ? 1 : 0,
                 latte::testing::int_path_name(path));
    }
  });
  EXPECT_EQ(&ggl::cpu_kernels(), &in_use);
  std::string why;
  const auto expected = expected_sets(&why);
  if (!expected) GTEST_SKIP() << "the sets were run, but which ones this CPU should have is unknown: " << why;
  EXPECT_EQ(visited, *expected);
}

// Every PerKernelSet test (test_gemm_int.cpp) exists once for each set this CPU runs.
TEST(KernelCoverage, PerKernelSetTestsExistForEveryRunnableSet) {
  std::string why;
  const auto expected_list = expected_sets(&why);
  if (!expected_list) GTEST_SKIP() << why;
  const std::set<std::string> expected(expected_list->begin(), expected_list->end());
  std::map<std::string, std::set<std::string>> sets_of;  // test name -> the sets it was instantiated for
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(i);
    if (std::string(suite.name()) != "Runnable/PerKernelSet") continue;
    for (int j = 0; j < suite.total_test_count(); ++j) {
      const std::string name = suite.GetTestInfo(j)->name();  // Test/<set>
      sets_of[name.substr(0, name.rfind('/'))].insert(name.substr(name.rfind('/') + 1));
    }
  }
  EXPECT_GE(sets_of.size(), 10u) << "the PerKernelSet tests of test_gemm_int.cpp are not in this program";
  for (const auto& [test, sets] : sets_of) EXPECT_EQ(sets, expected) << test;
}

}  // namespace test_kernel_coverage
