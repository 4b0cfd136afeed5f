// `latte info MODEL --plan` and the placement flags on the command line: the table and summary
// line for llama.cpp's flag combinations, planned for a GPU given by --gpu-vram (this machine has
// none), and one-line errors naming the flag for bad values.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "ggml-like/registry/backend_registry.h"
#include "tests/support/test_support.h"

namespace test_plan_cli {

using latte::testing::run_latte;
using latte::testing::run_latte_apart;
using latte::testing::shared_dir;

constexpr const char* kModel = "fixtures/ds2-lite-27l-q8_0.gguf";
std::string model() { return latte::testing::shell_quoted(shared_dir() / kModel); }

TEST(PlanCli, TablesForLlamaCppFlags) {
  LATTE_REQUIRE_SHARED(kModel);
  struct Case {
    std::string flags;
    std::string summary_part;  // must appear in the summary line
  };
  const Case cases[] = {
      {"", "attention 0/27 layers, dense ffn 0/1, shared experts 0/26, routed experts 0/26, output head cpu"},
      {"-ngl 99", "attention 27/27 layers, dense ffn 1/1, shared experts 26/26, routed experts 26/26, output head gpu"},
      {"-ngl 27", "attention 27/27 layers, dense ffn 1/1, shared experts 26/26, routed experts 26/26, output head cpu"},
      {"-ngl 10", "attention 10/27 layers, dense ffn 0/1, shared experts 10/26, routed experts 10/26, output head cpu"},
      {"-ngl 99 --cpu-moe", "attention 27/27 layers, dense ffn 1/1, shared experts 26/26, routed experts 0/26"},
      {"--n-gpu-layers 99 --n-cpu-moe 20", "shared experts 26/26, routed experts 7/26"},
      {"--gpu-layers all -ot exps=CPU",
       "attention 27/27 layers, dense ffn 1/1, shared experts 26/26, routed experts 0/26"},
      {"-ngl 0 -ot 'attn=cuda,cache=cuda'", "attention 27/27 layers, dense ffn 0/1"},
      {"-ngl 0 --override-tensor attn=cuda --override-tensor cache=cuda", "attention 27/27 layers, dense ffn 0/1"},
  };
  for (const Case& c : cases) {
    const auto r = run_latte_apart("info " + model() + " --plan --gpu-vram 24G " + c.flags);
    ASSERT_EQ(r.exit_code, 0) << c.flags << "\n" << r.err;
    EXPECT_EQ(r.err, "") << c.flags;
    EXPECT_NE(r.out.find("placement:     -c 4096 (f16 cache), batch 512, a GPU with 24.00 GiB free (--gpu-vram)"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find(c.summary_part), std::string::npos) << c.flags << "\n" << r.out;
    EXPECT_NE(r.out.find("\n   26  "), std::string::npos) << "one row per layer";
  }
}

TEST(PlanCli, BudgetAndCacheSize) {
  LATTE_REQUIRE_SHARED(kModel);
  // The cache doubles with -c and halves from f16 to q8_0-ish; the budget shows in the summary.
  const auto a = run_latte("info " + model() + " --plan -ngl 99 -c 8192");
  const auto b = run_latte("info " + model() + " --plan -ngl 99 -c 8192 --cache-type f32");
  ASSERT_EQ(a.exit_code, 0) << a.out;
  ASSERT_EQ(b.exit_code, 0) << b.out;
  // 1152 B per token and layer at f16: 27 * 1152 * 8192 = 243 MiB; f32 doubles it.
  EXPECT_NE(a.out.find("243.00 MiB latent cache"), std::string::npos) << a.out;
  EXPECT_NE(b.out.find("486.00 MiB latent cache"), std::string::npos) << b.out;
  // auto: 1 GiB less the 512 MiB margin.
  const auto c = run_latte("info " + model() + " --plan --gpu-budget auto --gpu-vram 1G");
  ASSERT_EQ(c.exit_code, 0) << c.out;
  EXPECT_NE(c.out.find("budget 512.00 MiB)"), std::string::npos) << c.out;
  const auto d = run_latte("info " + model() + " --plan --gpu-budget 20M");
  ASSERT_EQ(d.exit_code, 0) << d.out;
  EXPECT_NE(d.out.find("of a 20.00 MiB budget"), std::string::npos) << d.out;
  EXPECT_EQ(d.out.find("over it by"), std::string::npos) << d.out;
}

TEST(PlanCli, BadValuesAreOneLineErrors) {
  LATTE_REQUIRE_SHARED(kModel);
  const std::string info = "info " + model() + " --plan ";
  struct Case {
    std::string args;
    std::string error;
  };
  const Case cases[] = {
      {info + "--gpu-budget lots", "latte info: error: --gpu-budget 'lots' is not a size (e.g. 12G, 512M) or auto\n"},
      {info + "--gpu-budget auto",
       "latte info: error: --gpu-budget auto: no GPU to size it for (give a size, e.g. 12G)\n"},
      {info + "-ngl auto", "latte info: error: -ngl auto: no GPU to size it for (give a size, e.g. 12G)\n"},
      {info + "-ngl lots", "latte info: error: -ngl 'lots' is not a layer count, auto or all\n"},
      {info + "-ot exps", "latte info: error: -ot 'exps' is not REGEX=cuda|cpu\n"},
      {info + "-ot exps=tpu", "latte info: error: -ot 'exps=tpu': unknown device 'tpu' (cuda or cpu)\n"},
      {info + "--n-cpu-moe x", "latte info: error: --n-cpu-moe: 'x' is not an integer\n"},
      {info + "--gpu-vram big", "latte info: error: --gpu-vram 'big' is not a size (e.g. 24G)\n"},
      {info + "--cache-type q4_1", "latte info: error: --cache-type 'q4_1' is not one of f32, f16, bf16, q8_0, q4_0\n"},
      {"info " + model() + " --cpu-moe", "latte info: error: --cpu-moe needs --plan\n"},
      {info + "--mem-budget lots", "latte info: error: --mem-budget 'lots' is not a size (e.g. 16G)\n"},
      {"info " + model() + " --mem-budget 4G", "latte info: error: --mem-budget needs --plan\n"},
      {"run -p hi -n 1 --gpu-budget 12Q",
       "latte run: error: --gpu-budget '12Q' is not a size (e.g. 12G, 512M) or auto\n"},
  };
  for (const Case& c : cases) {
    const auto r = run_latte_apart(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args;
    EXPECT_EQ(r.err, c.error) << c.args;
  }
  const auto regex = run_latte_apart(info + "-ot '(=cpu'");
  EXPECT_EQ(regex.exit_code, 1);
  EXPECT_EQ(regex.err.rfind("latte info: error: -ot '(=cpu': '(' is not a regular expression (", 0), 0u) << regex.err;
}

// The RAM tier under --mem-budget: everything fits a large budget; a budget between the resident
// part and the whole model leaves an expert cache for some of the routed experts; one below the
// resident part is a warning, not an error.
TEST(PlanCli, MemoryBudgetSplitsTheRam) {
  LATTE_REQUIRE_SHARED(kModel);
  const auto all = run_latte_apart("info " + model() + " --plan --mem-budget 16G");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_NE(all.out.find("memory:        16.00 GiB budget (--mem-budget)\nram: "), std::string::npos) << all.out;
  EXPECT_NE(all.out.find(" experts of up to "), std::string::npos) << all.out;
  EXPECT_NE(all.out.find(": all fit, nothing is read from disk"), std::string::npos) << all.out;
  EXPECT_EQ(all.out.find("warning"), std::string::npos) << all.out;

  const auto none = run_latte_apart("info " + model() + " --plan --mem-budget 1K");
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_NE(none.out.find("holds 0 (0%)"), std::string::npos) << none.out;
  EXPECT_NE(none.out.find("\nwarning: the resident part and work buffers ("), std::string::npos) << none.out;

  // none: no budget, so no RAM tier to plan.
  const auto unlimited = run_latte_apart("info " + model() + " --plan --mem-budget none");
  ASSERT_EQ(unlimited.exit_code, 0) << unlimited.err;
  EXPECT_NE(unlimited.out.find("\nram: no budget (--mem-budget none: every tensor stays in RAM, nothing is paged)\n"),
            std::string::npos)
      << unlimited.out;
  EXPECT_EQ(unlimited.out.find("memory: "), std::string::npos) << unlimited.out;

  // On the GPU, routed experts are not the RAM's to hold.
  const auto gpu = run_latte_apart("info " + model() + " --plan --gpu-vram 24G -ngl 99 --mem-budget 1K");
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  EXPECT_EQ(gpu.out.find("ram: routed experts"), std::string::npos) << gpu.out;
  EXPECT_NE(gpu.out.find("ram: "), std::string::npos) << gpu.out;
}

// Where this machine lets the tests make a memory cgroup (root, a memory controller), the default
// budget is the cgroup's limit less its headroom: 1 GiB less 256 MiB.
TEST(PlanCli, TheMemoryCgroupLimitIsTheDefaultBudget) {
  LATTE_REQUIRE_SHARED(kModel);
  if (::geteuid() != 0) GTEST_SKIP() << "not root: cannot make a memory cgroup";
  if (!std::filesystem::exists("/sys/fs/cgroup/memory") &&
      !std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers"))
    GTEST_SKIP() << "no memory cgroup controller mounted";
  const std::filesystem::path script = latte::testing::test_data_dir() / "../../scripts/cgroup-run.sh";
  const auto r = latte::testing::run_command(latte::testing::shell_quoted(script) + " --keep-cache 1G " +
                                             latte::testing::shell_quoted(latte::testing::latte_binary()) + " info " +
                                             model() + " --plan");
  if (r.out.find("cgroup-run: cannot create") != std::string::npos)
    GTEST_SKIP() << "this machine does not let the tests make a cgroup: " << r.out;
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("memory:        768.00 MiB budget (the memory cgroup's limit or MemAvailable, less 5%)"),
            std::string::npos)
      << r.out;
}

TEST(PlanCli, RunNotesThePlacementFlags) {
  const ggl::GpuDevices gpus = ggl::gpu_devices();
  if (!gpus.devices.empty()) GTEST_SKIP() << "a GPU is present: the placement flags offload instead of a note";
  const std::string why = gpus.why_none + ", running on the CPU";
  const auto r = run_latte_apart("run -p hi -n 1 --temp 0 -ngl 99 --cpu-moe -ot exps=cpu -nopo");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.substr(0, r.err.find('\n') + 1), "latte run: note: -ngl 99 --cpu-moe -ot exps=cpu: " + why + "\n");
}

TEST(PlanCli, SystemNamesTheGpusOrWhyNone) {
  const auto r = run_latte("info --system");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\ngpu:           "), std::string::npos) << r.out;
  if (!ggl::built_with_gpu()) {
    EXPECT_NE(r.out.find("gpu:           none (built without CUDA)"), std::string::npos) << r.out;
  }
}

}  // namespace test_plan_cli
