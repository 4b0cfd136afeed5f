// Q4_0 matrices rewritten at load into 8 interleaved rows (src/model/interleave.h,
// ggml-like/quant/interleaved.h): the layout itself, which tensors a model rewrites, and that a
// repacked model computes what the file's layout does, with every kernel set (the sets with
// interleaved kernels read it; the others never see it).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/gguf/gguf.h"
#include "ggml-like/quant/interleaved.h"
#include "ggml-like/quant/legacy.h"
#include "ggml-like/quant/quant.h"
#include "src/model/model.h"
#include "src/model/session.h"
#include "tests/kernel_sets.h"
#include "tests/logit_metrics.h"
#include "tests/test_support.h"

namespace {

using ggl::Type;

TEST(Interleave, LayoutPutsFourQuantBytesOfEachRowSideBySide) {
  constexpr int64_t rows = 16, n = 64, blocks = n / 32;
  std::vector<uint8_t> plain(ggl::row_bytes(Type::Q4_0, n) * rows);
  std::mt19937 rng(3);
  for (uint8_t& b : plain) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> mixed(plain.size()), back(plain.size());
  ggl::interleave_rows(Type::Q4_0_R8, plain.data(), mixed.data(), rows, n);
  const auto* src = reinterpret_cast<const ggl::BlockQ4_0*>(plain.data());
  for (int64_t g = 0; g < rows / 8; ++g)
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* at = mixed.data() + (g * blocks + b) * 144;
      for (int64_t r = 0; r < 8; ++r) {
        const ggl::BlockQ4_0& block = src[(g * 8 + r) * blocks + b];
        EXPECT_EQ(std::memcmp(at + 2 * r, &block.d, 2), 0);
        for (int u = 0; u < 4; ++u) EXPECT_EQ(std::memcmp(at + 16 + (u * 8 + r) * 4, block.qs + 4 * u, 4), 0);
      }
    }
  for (int64_t g = 0; g < rows / 8; ++g)
    ggl::deinterleave_group(Type::Q4_0_R8, mixed.data() + g * 8 * ggl::row_bytes(Type::Q4_0, n),
                            back.data() + g * 8 * ggl::row_bytes(Type::Q4_0, n), n);
  EXPECT_EQ(back, plain);
}

TEST(Interleave, OnlyWholeGroupsOfQ4_0RowsAndNeverInFiles) {
  EXPECT_EQ(ggl::interleaved_type(Type::Q4_0, 24), Type::Q4_0_R8);
  EXPECT_FALSE(ggl::interleaved_type(Type::Q4_0, 20));
  EXPECT_FALSE(ggl::interleaved_type(Type::Q8_0, 24));
  EXPECT_EQ(ggl::plain_type(Type::Q4_0_R8), Type::Q4_0);
  // The GGUF reader and writer know the file types only.
  EXPECT_FALSE(ggl::type_traits(static_cast<uint32_t>(Type::Q4_0_R8)));
  EXPECT_FALSE(ggl::type_from_name("q4_0_r8"));
  std::vector<uint8_t> bytes(ggl::row_bytes(Type::Q4_0, 32) * 8);
  ggl::GgufWriter writer;
  EXPECT_THROW(writer.add_tensor("w", Type::Q4_0_R8, {32, 8}, bytes.data()), ggl::Error);
}

// The last-position logits of a prompt, then of each of `decode` single-token steps.
std::vector<float> run(const latte::Model& model, const std::vector<int32_t>& tokens, int decode) {
  latte::Session session(model, {.n_ctx = 128, .n_threads = 2});
  const std::vector<int32_t> prompt(tokens.begin(), tokens.end() - decode);
  std::vector<float> out = session.eval(prompt, latte::Logits::kAll);
  for (int i = 0; i < decode; ++i) {
    const int32_t t = tokens[tokens.size() - decode + i];
    const std::vector<float> step = session.eval(std::span<const int32_t>(&t, 1), latte::Logits::kLast);
    out.insert(out.end(), step.begin(), step.end());
  }
  return out;
}

// A dense model quantized to Q4_0 (attention projections, feed-forward, output head), loaded as
// repacked and as the file holds it: the repacked model interleaves every product matrix where the
// set takes the layout (none on a set without interleaved kernels), and both give the same logits
// up to float summation order, through the prompt's panels and the decode steps' rows. (A dense
// model: on the random MoE fixtures a summation-order difference can flip a near-tie of the
// router, which the fixture tests' thresholds absorb and an equality check would not.)
TEST(Interleave, RepackedModelMatchesTheFileLayout) {
  const std::string rel = "fixtures/llama-gqa-tiny-f32.gguf";
  LATTE_REQUIRE_SHARED(rel);
  const std::string path = ::testing::TempDir() + "latte-interleave-q4_0.gguf";
  const auto q = latte::testing::run_latte("quantize --pure --no-progress " +
                                           (latte::testing::shared_dir() / rel).string() + " " + path + " q4_0");
  ASSERT_EQ(q.exit_code, 0) << q.out;
  std::vector<int32_t> tokens =
      latte::testing::read_token_file(latte::testing::shared_dir() / "fixtures/llama-gqa-tiny-f32.tokens.txt");
  tokens.resize(std::min<size_t>(tokens.size(), 24));
  latte::testing::for_each_kernel_set([&](const ggl::CpuKernels&) {
    const latte::Model plain(path, {.repack = false});
    const latte::Model repacked(path);
    EXPECT_EQ(plain.interleaved(), nullptr);
    const bool takes = ggl::int16_gemm().supports(Type::Q4_0_R8, plain.hparams().n_embd);
    ASSERT_EQ(repacked.interleaved() != nullptr, takes);
    if (takes) {
      // Every Q4_0 matrix but the token embeddings is rewritten.
      std::set<std::string> rewritten;
      latte::ModelWeights w = repacked.weights();
      latte::for_each_weight(w, [&](latte::WeightRef& t) {
        if (t && ggl::is_interleaved(t->type)) rewritten.insert(t->name);
      });
      EXPECT_EQ(rewritten.size(), repacked.interleaved()->tensors());
      for (const ggl::TensorInfo& t : plain.file().tensors())
        EXPECT_EQ(rewritten.count(t.name) == 1, t.type == Type::Q4_0 && t.name != "token_embd.weight") << t.name;
    }
    const int decode = 6;
    const std::vector<float> want = run(plain, tokens, decode), got = run(repacked, tokens, decode);
    const latte::testing::LogitMetrics m = latte::testing::compare_logits(want, got, plain.hparams().n_vocab);
    std::printf("[repacked vs file layout] nrmse %.3g\n", m.nrmse);
    // The two orders of float sums differ by ~1e-6 of a product (the 16-bit activations' own
    // rounding moves it ~1e-3); over the decode steps the logits measured ~5e-5 apart.
    EXPECT_LT(m.nrmse, 5e-4);
  });
  std::remove(path.c_str());
}

// --no-repack (llama.cpp's -nr) is accepted by the commands that load a model.
TEST(Interleave, NoRepackFlagIsAccepted) {
  for (const char* flag : {"--no-repack", "-nr"}) {
    const auto r = latte::testing::run_latte(std::string("run -n 2 -p hi --temp 0 ") + flag);
    EXPECT_EQ(r.exit_code, 0) << r.out;
  }
}

}  // namespace
