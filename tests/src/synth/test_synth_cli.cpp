// `latte synth` through the binary: a small file that `latte bench` and the engine load, and
// one-line errors for bad flags.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include <set>

#include "convert/quant_recipe.h"
#include "ggml-like/gguf/gguf.h"
#include "src/model/model.h"
#include "tests/support/test_support.h"

namespace test_synth_cli {

namespace fs = std::filesystem;
using latte::testing::run_latte;

class SynthCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("latte-synth-cli-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// A short `latte bench` of a written file (stdout only): the engine runs what synth wrote.
latte::testing::CommandResult bench_briefly(const fs::path& model) {
  return run_latte("bench -m " + model.string() + " -p 8 -n 2 -r 1 -t 1", /*merge_stderr=*/false);
}

TEST_F(SynthCli, WritesALoadableFileAndSaysWhat) {
  const fs::path out = dir_ / "tiny.gguf";
  const auto r =
      run_latte("synth --preset tiny --layers 2 --type q8_0 --mla-layout k_b --seed 3 --name mini -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("latte synth: wrote " + out.string() + " (tiny 2 layers, q8_0)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokenizer: none"), std::string::npos) << r.out;
  const latte::Model model(out.string());
  EXPECT_EQ(model.hparams().n_layer, 2);
  EXPECT_EQ(model.file().metadata().get<std::string>("general.name"), "mini");
  EXPECT_NE(model.weights().layers[0].wk_b, nullptr);  // --mla-layout k_b

  const auto bench = bench_briefly(out);
  ASSERT_EQ(bench.exit_code, 0) << bench.out;
  EXPECT_NE(bench.out.find("| mini "), std::string::npos) << bench.out;
}

// Cut to its first layer, V3's geometry has no MoE layer left (its first three are dense): synth
// must still write a file latte runs (tiny-v3 is V3 flavoured, with one leading dense layer).
TEST_F(SynthCli, AllDenseLayersLoadAndRun) {
  const fs::path out = dir_ / "dense.gguf";
  const auto r = run_latte("synth --preset tiny-v3 --layers 1 --type q8_0 -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const latte::Model model(out.string());
  EXPECT_EQ(model.hparams().moe.n_leading_dense, 1);
  const auto bench = bench_briefly(out);
  EXPECT_EQ(bench.exit_code, 0) << bench.out;
}

// --type q4_k_m: the synthetic model in llama.cpp's mix, each tensor in the type the recipe gives it
// (the same code `latte quantize` uses), and the engine runs it.
TEST_F(SynthCli, KquantMixFollowsTheRecipe) {
  const fs::path out = dir_ / "mix.gguf";
  const auto r = run_latte("synth --preset tiny-v3 --layers 3 --type Q4_K_M -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const ggl::GgufFile f(out.string());
  EXPECT_EQ(f.metadata().get<uint32_t>("general.file_type"), 15u);
  std::vector<latte::convert::RecipeTensor> ts;
  for (const auto& t : f.tensors()) ts.push_back({t.name, std::vector<int64_t>(t.ne, t.ne + t.n_dims)});
  const auto want =
      latte::convert::choose_tensor_types(*latte::convert::find_file_type("q4_k_m"),
                                          latte::convert::RecipeModel::from_metadata(f.metadata(), f.path()), ts, {});
  std::set<ggl::Type> types;
  for (size_t i = 0; i < ts.size(); ++i) {
    EXPECT_EQ(ggl::type_name(f.tensors()[i].type), ggl::type_name(want[i].type)) << ts[i].name;
    types.insert(f.tensors()[i].type);
  }
  EXPECT_TRUE(types.count(ggl::Type::Q4_K)) << r.out;
  EXPECT_TRUE(types.count(ggl::Type::Q6_K) || types.count(ggl::Type::Q8_0)) << r.out;  // output, ffn_down
  const auto bench = bench_briefly(out);
  EXPECT_EQ(bench.exit_code, 0) << bench.out;
}

// An i-quant mix with per-tensor overrides, in the style of the low-bit DeepSeek files people run
// (some tensors at 4 bits, others at 1-2 bits): each override wins where it matches, the types
// llama.cpp quantizes only with an importance matrix are written without one (uniform), and the
// engine runs the file. (The tiny model's rows of 64 cannot hold the 256-value types: only its
// tensors with longer rows are checked.)
TEST_F(SynthCli, TensorTypeOverridesAndTheIquantsWithoutAnImportanceMatrix) {
  const fs::path out = dir_ / "ud.gguf";
  const auto r = run_latte(
      "synth --preset tiny --type iq2_xxs --tensor-type 'blk\\.[01]\\.attn_kv_b=q4_k' --tensor-type attn_output=iq1_s "
      "--tensor-type 'ffn_down\\.=iq1_m' -o " +
      out.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const ggl::GgufFile f(out.string());
  std::set<ggl::Type> types;
  for (const auto& t : f.tensors()) {
    const std::string name = t.name;
    types.insert(t.type);
    if (t.ne[0] % 256 != 0 || t.n_dims < 2) continue;
    auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
    const ggl::Type want = has("blk.0.attn_kv_b") || has("blk.1.attn_kv_b") ? ggl::Type::Q4_K
                           : has("attn_output")                             ? ggl::Type::IQ1_S
                           : has("ffn_down.")                               ? ggl::Type::IQ1_M
                                                                            : t.type;
    EXPECT_EQ(ggl::type_name(t.type), ggl::type_name(want)) << name;
  }
  for (ggl::Type t : {ggl::Type::Q4_K, ggl::Type::IQ1_S, ggl::Type::IQ1_M, ggl::Type::IQ2_XXS})
    EXPECT_TRUE(types.count(t)) << ggl::type_name(t) << ": " << r.out;
  const auto bench = bench_briefly(out);
  EXPECT_EQ(bench.exit_code, 0) << bench.out;
}

TEST_F(SynthCli, BadInputIsAOneLineError) {
  struct Case {
    std::string args, expect;
  };
  const std::string o = " -o " + (dir_ / "x.gguf").string();
  const Case cases[] = {
      {"synth --preset v9" + o, "unknown preset 'v9'"},
      {"synth --preset tiny --type q5_k" + o, "--type 'q5_k'"},
      {"synth --preset tiny --mla-layout kvb" + o, "--mla-layout 'kvb'"},
      {"synth --preset tiny --arch llama" + o, "--arch 'llama'"},
      {"synth --preset tiny --layers 0" + o, "--layers 0"},
      {"synth --preset tiny --vocab /nonexistent/vocab.gguf" + o, "/nonexistent/vocab.gguf"},
      {"synth --preset tiny", "--output"},
      {"synth -o x.gguf", "--preset"},
      {"synth --preset tiny --layers many" + o, "--layers"},
      {"synth --preset tiny --tensor-type attn=q9_k" + o, "--tensor-type attn=q9_k: type 'q9_k'"},
      {"synth --preset tiny --tensor-type attn" + o, "--tensor-type"},
      {"synth --preset tiny -o /nonexistent/dir/x.gguf", "/nonexistent/dir"},
  };
  for (const Case& c : cases) {
    const auto r = run_latte(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << " -> " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.args << " -> " << r.out;
  }
  EXPECT_FALSE(fs::exists(dir_ / "x.gguf"));
}

}  // namespace test_synth_cli
