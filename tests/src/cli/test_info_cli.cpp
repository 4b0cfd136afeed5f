// `latte info` describes every shared GGUF correctly and rejects bad files with one line.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <map>

#include "ggml-like/gguf/gguf.h"
#include "tests/support/test_support.h"

namespace test_info_cli {

using latte::testing::run_latte;
using latte::testing::shared_dir;

struct Expected {
  const char* relpath;
  const char* architecture;
  size_t tensors;
};

class InfoOnSharedFiles : public ::testing::TestWithParam<Expected> {};

TEST_P(InfoOnSharedFiles, DescribesArchitectureTensorsAndTypes) {
  const Expected& e = GetParam();
  LATTE_REQUIRE_SHARED(e.relpath);
  std::string path = (shared_dir() / e.relpath).string();
  auto r = run_latte("info '" + path + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(std::string("architecture:  ") + e.architecture), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(fmt::format("tensors:       {} tensors", e.tensors)), std::string::npos) << r.out;

  // Every tensor appears with its type and shape in --tensors.
  auto listed = run_latte("info --tensors '" + path + "'");
  ASSERT_EQ(listed.exit_code, 0) << listed.out;
  ggl::GgufFile file(path);
  for (const auto& t : file.tensors()) {
    std::string shape = fmt::format("[{}]", fmt::join(std::vector<int64_t>(t.ne, t.ne + t.n_dims), ", "));
    EXPECT_NE(listed.out.find(t.name), std::string::npos) << t.name;
    EXPECT_NE(listed.out.find(shape), std::string::npos) << t.name << " " << shape;
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, InfoOnSharedFiles,
                         ::testing::Values(Expected{"fixtures/ds2-lite-27l-q8_0.gguf", "deepseek2", 377},
                                           Expected{"fixtures/ds2-mini-mla-f32.gguf", "deepseek2", 34},
                                           Expected{"fixtures/ds2-v2-tiny-f32.gguf", "deepseek2", 47},
                                           Expected{"fixtures/ds2-v2-tiny-q4_0.gguf", "deepseek2", 47},
                                           Expected{"fixtures/ds2-v2-tiny-q8_0.gguf", "deepseek2", 47},
                                           Expected{"fixtures/ds3-tiny-q4_0.gguf", "deepseek2", 66},
                                           Expected{"fixtures/llama-gqa-tiny-f32.gguf", "llama", 30},
                                           Expected{"fixtures/llama-gqa-tiny-q8_0.gguf", "llama", 30},
                                           Expected{"models/stories260K.gguf", "llama", 48},
                                           Expected{"models/tiny-mla-stories-f32.gguf", "deepseek2", 79},
                                           Expected{"models/tiny-mla-stories-q8_0.gguf", "deepseek2", 79}),
                         [](const ::testing::TestParamInfo<Expected>& info) {
                           std::string name = std::filesystem::path(info.param.relpath).stem().string();
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(InfoCli, PerTypeTotalsAndBitsPerWeight) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q8_0.gguf");
  auto r = run_latte("info '" + (shared_dir() / "fixtures/ds2-v2-tiny-q8_0.gguf").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // Q8_0 stores 34 bytes per 32 weights: 8.5 bits per weight.
  EXPECT_NE(r.out.find("q8_0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("8.50 bits/weight"), std::string::npos) << r.out;
}

// A K-quant mix: one line per type with its tensor count, bytes and bits per weight (Q4_K: 144 bytes
// per 256 weights, Q6_K 210, Q5_0 22 per 32).
TEST(InfoCli, KquantMixPerType) {
  const std::string rel = "fixtures/kquant/kq-tiny-q4_k_m.gguf";
  LATTE_REQUIRE_SHARED(rel);
  const std::string path = (shared_dir() / rel).string();
  auto r = run_latte("info '" + path + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const ggl::GgufFile file(path);
  std::map<std::string, std::pair<size_t, size_t>> per_type;  // count, bytes
  for (const auto& t : file.tensors()) {
    auto& e = per_type[std::string(ggl::type_name(t.type))];
    e.first++;
    e.second += t.nbytes;
  }
  const std::map<std::string, std::string> bits = {
      {"q4_K", "4.50"}, {"q6_K", "6.56"}, {"q5_0", "5.50"}, {"f32", "32.00"}};
  ASSERT_EQ(per_type.size(), bits.size()) << r.out;
  for (const auto& [name, e] : per_type) {
    const std::string line = fmt::format("  {:<6} {:>4} tensors", name, e.first);
    const size_t at = r.out.find(line);
    ASSERT_NE(at, std::string::npos) << line << "\n" << r.out;
    const std::string rest = r.out.substr(at, r.out.find('\n', at) - at);
    EXPECT_NE(rest.find(bits.at(name) + " bits/weight"), std::string::npos) << rest;
  }
  EXPECT_NE(r.out.find(fmt::format("tensors:       {} tensors", file.tensors().size())), std::string::npos) << r.out;
}

TEST(InfoCli, LatentCacheBytesNextToPerHeadKv) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-lite-27l-q8_0.gguf");
  auto r = run_latte("info '" + (shared_dir() / "fixtures/ds2-lite-27l-q8_0.gguf").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // 27 layers x (512 + 64) latent values x 2 bytes.
  EXPECT_NE(r.out.find("kv cache:      30.38 KiB per token at f16 (1152 B per layer); per-head K/V would take"),
            std::string::npos)
      << r.out;
}

TEST(InfoCli, VocabularyFileShowsTokenizer) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-deepseek-llm.gguf");
  auto r = run_latte("info '" + (shared_dir() / "vocab/ggml-vocab-deepseek-llm.gguf").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("gpt2 (pre: deepseek-llm), 102400 tokens"), std::string::npos) << r.out;
}

TEST(InfoCli, BadFileIsOneLineErrorAndNonZeroExit) {
  std::string path = ::testing::TempDir() + "/not-a-gguf.bin";
  std::ofstream(path) << "this is not a gguf file at all";
  auto r = run_latte("info '" + path + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find(path), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bad magic"), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;

  auto missing = run_latte("info /nonexistent/file.gguf");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.out.find("cannot open"), std::string::npos) << missing.out;
}

}  // namespace test_info_cli
