// `latte batched-bench` through the binary on a tiny fixture: llama-batched-bench's jsonl keys and
// table, one line per (pp, tg, B) that fits in -c (the others skipped), the counts consistent with
// the timings; bad lists and formats are one-line errors.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/test_support.h"

namespace test_batched_bench_cli {

using latte::testing::run_latte;

std::string fixture() { return (latte::testing::shared_dir() / "fixtures/ds2-v2-tiny-q8_0.gguf").string(); }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(BatchedBenchCli, JsonlHasLlamaBatchedBenchKeysAndSkipsWhatDoesNotFit) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q8_0.gguf");
  // -c 40: B = 1 and 2 fit (12 and 24 rows), B = 4 (48 rows) does not.
  const auto r = run_latte(
      "batched-bench -m " + fixture() + " -npp 8 -ntg 4 -npl 1,2,4 -c 40 -b 16 -t 1 --output-format jsonl", false);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  int64_t pl = 1;
  for (const std::string& line : lines) {
    const nlohmann::json j = nlohmann::json::parse(line);
    for (const char* key :
         {"n_kv_max", "n_batch", "n_ubatch", "flash_attn", "is_pp_shared", "n_gpu_layers", "n_threads",
          "n_threads_batch", "pp", "tg", "pl", "n_kv", "t_pp", "speed_pp", "t_tg", "speed_tg", "t", "speed"})
      EXPECT_TRUE(j.contains(key)) << key << " in " << line;
    EXPECT_EQ(j["n_kv_max"], 40);
    EXPECT_EQ(j["n_batch"], 16);
    EXPECT_EQ(j["pp"], 8);
    EXPECT_EQ(j["tg"], 4);
    EXPECT_EQ(j["pl"], pl);
    EXPECT_EQ(j["n_kv"], pl * 12);
    const double t_pp = j["t_pp"], t_tg = j["t_tg"];
    ASSERT_GT(t_pp, 0);
    ASSERT_GT(t_tg, 0);
    EXPECT_NEAR(j["speed_pp"].get<double>(), pl * 8 / t_pp, 1e-6 * pl * 8 / t_pp);
    EXPECT_NEAR(j["speed_tg"].get<double>(), pl * 4 / t_tg, 1e-6 * pl * 4 / t_tg);
    EXPECT_NEAR(j["speed"].get<double>(), pl * 12 / (t_pp + t_tg), 1e-6 * pl * 12 / (t_pp + t_tg));
    pl *= 2;
  }
}

TEST(BatchedBenchCli, MarkdownTableHasOneRowPerTest) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q8_0.gguf");
  const auto r = run_latte("batched-bench -m " + fixture() + " -npp 4,8 -ntg 2 -npl 1,3 -t 1", false);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  int rows = 0;
  bool header = false;
  for (const std::string& line : lines_of(r.out)) {
    header = header || line.find("|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |") == 0;
    if (line.rfind("| ", 0) == 0 && line.find("PP") == std::string::npos) ++rows;
  }
  EXPECT_TRUE(header) << r.out;
  EXPECT_EQ(rows, 4) << r.out;
}

// -pps: one prompt read and copied into every sequence; N_KV and S_PP as llama-batched-bench counts
// them (PP + B*TG, PP / T_PP), so -c 24 takes B = 4 (8 + 4*4 = 24 cells) where without -pps it
// would need 48.
TEST(BatchedBenchCli, SharedPromptCountsAsLlamaBatchedBench) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q8_0.gguf");
  for (const bool shared : {true, false}) {
    const auto r = run_latte("batched-bench -m " + fixture() +
                                 " -npp 8 -ntg 4 -npl 4 -c 24 -t 1 --output-format jsonl" + (shared ? " -pps" : ""),
                             false);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::vector<std::string> lines = lines_of(r.out);
    if (!shared) {
      EXPECT_TRUE(lines.empty()) << r.out;  // 4 * (8 + 4) = 48 rows do not fit in 24
      continue;
    }
    ASSERT_EQ(lines.size(), 1u) << r.out;
    const nlohmann::json j = nlohmann::json::parse(lines[0]);
    EXPECT_EQ(j["is_pp_shared"], true);
    EXPECT_EQ(j["n_kv"], 8 + 4 * 4);
    const double t_pp = j["t_pp"];
    ASSERT_GT(t_pp, 0);
    EXPECT_NEAR(j["speed_pp"].get<double>(), 8 / t_pp, 1e-6 * 8 / t_pp);
    EXPECT_NEAR(j["speed_tg"].get<double>(), 4 * 4 / j["t_tg"].get<double>(), 1e-6 * j["speed_tg"].get<double>());
  }
}

// --mixed-load: 4 prompts (704 new tokens) beside 16 decoders; with -b 116 each step carries the 16
// decode tokens and 100 prompt tokens, first come first, so the prompts are read in
// ceil(704 / 100) = 8 steps and finish in their order.
TEST(BatchedBenchCli, MixedLoadReadsThePromptsBesideTheDecoders) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q8_0.gguf");
  const auto r = run_latte("batched-bench -m " + fixture() + " --mixed-load -b 116 -t 2 --output-format jsonl", false);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 5u) << r.out;
  const std::pair<int64_t, int64_t> prompts[] = {{512, 64}, {0, 128}, {0, 256}, {256, 256}};
  double last_ttft = 0;
  for (size_t i = 0; i < 4; ++i) {
    const nlohmann::json j = nlohmann::json::parse(lines[i]);
    EXPECT_EQ(j["request"], "prompt");
    EXPECT_EQ(j["cached"], prompts[i].first);
    EXPECT_EQ(j["new"], prompts[i].second);
    EXPECT_GE(j["ttft"].get<double>(), last_ttft) << lines[i];
    last_ttft = j["ttft"];
  }
  const nlohmann::json d = nlohmann::json::parse(lines[4]);
  EXPECT_EQ(d["request"], "decode");
  EXPECT_EQ(d["sequences"], 16);
  EXPECT_EQ(d["cached_min"], 50);
  EXPECT_EQ(d["cached_max"], 400);
  EXPECT_EQ(d["steps"], 8);
  EXPECT_LE(last_ttft, d["t_mixed"].get<double>());
  EXPECT_NEAR(d["speed_tg_mixed"].get<double>(), 16 * 8 / d["t_mixed"].get<double>(),
              1e-6 * d["speed_tg_mixed"].get<double>());
  EXPECT_NEAR(d["speed_tg_alone"].get<double>(), 16 * 8 / d["t_alone"].get<double>(),
              1e-6 * d["speed_tg_alone"].get<double>());

  for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
           {"--mixed-load -npl 4", "drop -npp / -ntg / -npl"}, {"--mixed-load -b 16", "leaves no room"}}) {
    const auto bad = run_latte("batched-bench -m " + fixture() + " " + flags);
    EXPECT_NE(bad.exit_code, 0) << flags;
    EXPECT_NE(bad.out.find(says), std::string::npos) << flags << ": " << bad.out;
  }
}

TEST(BatchedBenchCli, BadFlagsAreOneLineErrors) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q8_0.gguf");
  for (const auto& [flags, says] :
       std::vector<std::pair<std::string, std::string>>{{"-npl 0", "-npl"},
                                                        {"-npp 8,x", "-npp"},
                                                        {"--output-format xml", "'xml' is not md or jsonl"},
                                                        {"-b 0", "-b"}}) {
    const auto r = run_latte("batched-bench -m " + fixture() + " -ntg 1 " + flags);
    EXPECT_NE(r.exit_code, 0) << flags;
    EXPECT_NE(r.out.find(says), std::string::npos) << flags << ": " << r.out;
    EXPECT_LE(lines_of(r.out).size(), 2u) << flags << ": " << r.out;
  }
}

}  // namespace test_batched_bench_cli
