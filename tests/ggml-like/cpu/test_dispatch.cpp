// The choice of CPU kernel set (ggml-like/cpu/kernel_set.h): which sets this CPU runs, LATTE_CPU's
// override, and, where qemu-x86_64 is installed, the binary run on an emulated CPU without AVX-512
// (qemu's TCG has AVX2, FMA, F16C and BMI2, no AVX-512): it must pick the avx2 set and execute no
// AVX-512 instruction anywhere (one would stop it with SIGILL), giving the text the avx2 set gives
// natively. On aarch64 (natively, or in the cross build where every test already runs under
// qemu-aarch64) the same on emulated ARM cores with and without the dot product instructions.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "ggml-like/cpu/kernel_set.h"
#include "tests/support/test_support.h"

namespace test_dispatch {

using latte::testing::run_command;
using latte::testing::run_latte;

bool has_set(std::string_view isa) {
  for (const ggl::CpuKernels* k : ggl::runnable_cpu_kernels())
    if (isa == k->isa) return true;
  return false;
}

// The set LATTE_CPU names where the suite runs under it (LATTE_CPU=avx2 ctest), else the best.
TEST(CpuDispatch, RunsTheBestSetItCanAndNamesIt) {
  const auto sets = ggl::runnable_cpu_kernels();
  ASSERT_FALSE(sets.empty());
  const char* forced = std::getenv("LATTE_CPU");
  const ggl::CpuKernels* expected = sets.front();
  if (forced != nullptr && *forced != '\0') {
    expected = nullptr;
    for (const ggl::CpuKernels* k : sets)
      if (std::string_view(k->isa) == forced) expected = k;
    ASSERT_NE(expected, nullptr) << "LATTE_CPU=" << forced << " is not a runnable set";
  }
  EXPECT_EQ(&ggl::cpu_kernels(), expected);
  const auto r = run_latte("info --system");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(std::string("kernels:       ") + expected->isa + " kernels"), std::string::npos) << r.out;
  // Without LATTE_CPU the binary takes the best set whatever the suite runs under.
  const auto best = run_command("env -u LATTE_CPU " + latte::testing::latte_binary().string() + " info --system");
  ASSERT_EQ(best.exit_code, 0) << best.out;
  EXPECT_NE(best.out.find(std::string("kernels:       ") + sets.front()->isa + " kernels"), std::string::npos)
      << best.out;
}

TEST(CpuDispatch, LatteCpuPicksARunnableSetAndRefusesOthers) {
  for (const ggl::CpuKernels* k : ggl::runnable_cpu_kernels()) {
    const auto forced = run_command(std::string("LATTE_CPU=") + k->isa + " " + latte::testing::latte_binary().string() +
                                    " info --system");
    ASSERT_EQ(forced.exit_code, 0) << forced.out;
    EXPECT_NE(forced.out.find(std::string("kernels:       ") + k->isa + " kernels"), std::string::npos) << forced.out;
  }
  const auto bad = run_command("LATTE_CPU=sse9 " + latte::testing::latte_binary().string() + " info --system");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("LATTE_CPU=sse9: not a kernel set this build has and this CPU runs"), std::string::npos)
      << bad.out;
}

TEST(CpuDispatch, AvxTwoMachineUnderQemuTakesTheAvx2SetAndNoAvx512) {
  if (run_command("command -v qemu-x86_64").exit_code != 0)
    GTEST_SKIP() << "qemu-x86_64 is not installed (Debian qemu-user)";
  if (!has_set("avx2")) GTEST_SKIP() << "this build has no avx2 kernel set (LATTE_NATIVE, or not x86-64)";
  const std::string latte = latte::testing::latte_binary().string();
  const auto info = run_command("env -u LATTE_CPU qemu-x86_64 -cpu max " + latte + " info --system");
  ASSERT_EQ(info.exit_code, 0) << info.out;
  EXPECT_NE(info.out.find("kernels:       avx2 kernels"), std::string::npos) << info.out;
  const std::string run = " run -n 24 --temp 0 -t 2 -p 'Once upon a time'";
  const auto emulated = run_command("env -u LATTE_CPU qemu-x86_64 -cpu max " + latte + run, false);
  const auto native = run_command("LATTE_CPU=avx2 " + latte + run, false);
  ASSERT_EQ(emulated.exit_code, 0) << emulated.out;
  ASSERT_EQ(native.exit_code, 0) << native.out;
  EXPECT_GT(emulated.out.size(), 40u) << emulated.out;
  EXPECT_EQ(emulated.out, native.out);
}

// The emulated cores: cortex-a53 (ARMv8.0-A, Advanced SIMD only) must take the neon set and refuse
// neon_dotprod; cortex-a76 and max (ARMv8.2-A and later, with dotprod) take neon_dotprod. The
// binary run on the core without dotprod executes no dotprod instruction anywhere (qemu would stop
// it with SIGILL) and writes what the neon set writes on the core with it.
TEST(CpuDispatch, ArmCoresUnderQemuTakeTheSetTheyRun) {
  if (!has_set("neon")) GTEST_SKIP() << "this build has no neon kernel set (LATTE_NATIVE, or not aarch64)";
  const std::string emulator = std::string_view(LATTE_EMULATOR).empty() ? "qemu-aarch64" : LATTE_EMULATOR;
  if (run_command("command -v qemu-aarch64").exit_code != 0)
    GTEST_SKIP() << "qemu-aarch64 is not installed (Debian qemu-user)";
  const std::string latte = latte::testing::latte_target_binary().string();
  // The choice from the emulated CPU alone (or the set `forced` names), whatever LATTE_CPU the
  // suite runs under.
  const auto on = [&](const char* cpu, std::string forced = "") {
    return "env -u LATTE_CPU " + (forced.empty() ? "" : "LATTE_CPU=" + forced + " ") + emulator + " -cpu " + cpu + " " +
           latte;
  };
  for (const auto& [cpu, isa] :
       {std::pair{"cortex-a53", "neon"}, {"cortex-a76", "neon_dotprod"}, {"max", "neon_dotprod"}}) {
    const auto info = run_command(on(cpu) + " info --system");
    ASSERT_EQ(info.exit_code, 0) << cpu << ": " << info.out;
    EXPECT_NE(info.out.find(std::string("kernels:       ") + isa + " kernels"), std::string::npos)
        << cpu << ": " << info.out;
  }
  const auto refused = run_command(on("cortex-a53", "neon_dotprod") + " info --system");
  EXPECT_EQ(refused.exit_code, 1) << refused.out;
  EXPECT_NE(
      refused.out.find("LATTE_CPU=neon_dotprod: not a kernel set this build has and this CPU runs (it runs: neon)"),
      std::string::npos)
      << refused.out;

  const std::string run = " run -n 24 --temp 0 -t 2 -p 'Once upon a time'";
  const auto without_dotprod = run_command(on("cortex-a53") + run, false);
  const auto with_dotprod = run_command(on("max", "neon") + run, false);
  ASSERT_EQ(without_dotprod.exit_code, 0) << without_dotprod.out;
  ASSERT_EQ(with_dotprod.exit_code, 0) << with_dotprod.out;
  EXPECT_GT(without_dotprod.out.size(), 40u) << without_dotprod.out;
  EXPECT_EQ(without_dotprod.out, with_dotprod.out);
}

}  // namespace test_dispatch
