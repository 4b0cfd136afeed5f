// `latte bench` through the binary on a tiny fixture: the Markdown table and the JSON array parse
// and hold what was asked for; --roofline adds the bound; a --mem-budget list runs the tests once
// per budget with the expert cache's figures; bad flags are one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ggml-like/gguf/gguf.h"
#include "src/bench/bench_report.h"
#include "tests/support/test_support.h"

namespace test_bench_cli {

using latte::testing::run_latte;
using latte::testing::run_latte_apart;

std::string fixture() { return (latte::testing::shared_dir() / "fixtures/ds2-v2-tiny-q8_0.gguf").string(); }

// llama-bench's model_size: the bytes of all tensor data.
uint64_t fixture_tensor_bytes() {
  const ggl::GgufFile file(fixture());
  uint64_t n = 0;
  for (const ggl::TensorInfo& t : file.tensors()) n += t.nbytes;
  return n;
}

// The cells of a Markdown table row, trimmed.
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  std::getline(ss, cell, '|');  // before the first bar
  while (std::getline(ss, cell, '|')) {
    const size_t a = cell.find_first_not_of(' '), b = cell.find_last_not_of(' ');
    out.push_back(a == std::string::npos ? "" : cell.substr(a, b - a + 1));
  }
  if (!out.empty() && out.back().empty()) out.pop_back();  // after the last bar
  return out;
}

std::vector<std::string> table_lines(const std::string& out) {
  std::vector<std::string> lines;
  std::stringstream ss(out);
  std::string line;
  while (std::getline(ss, line))
    if (line.rfind("|", 0) == 0) lines.push_back(line);
  return lines;
}

TEST(BenchCli, MarkdownTableHasOneRowPerTest) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q8_0.gguf");
  const auto r = run_latte("bench -m " + fixture() + " -p 16 -n 4 -r 2 -d 0,8 -t 1", /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::vector<std::string> lines = table_lines(r.out);
  ASSERT_EQ(lines.size(), 6u) << r.out;  // header, rule, 4 tests
  EXPECT_EQ(cells(lines[0]),
            (std::vector<std::string>{"model", "size", "params", "backend", "threads", "test", "t/s"}));
  const std::vector<std::string> tests = {"pp16", "tg4", "pp16 @ d8", "tg4 @ d8"};
  const std::regex speed(R"(([0-9]+\.[0-9]{2}) ± ([0-9]+\.[0-9]{2}))");
  for (size_t i = 0; i < tests.size(); ++i) {
    const std::vector<std::string> c = cells(lines[i + 2]);
    ASSERT_EQ(c.size(), 7u) << lines[i + 2];
    EXPECT_EQ(c[0], ggl::GgufFile(fixture()).metadata().get<std::string>("general.name"));
    EXPECT_EQ(c[1], latte::bench::format_size(fixture_tensor_bytes()));
    EXPECT_EQ(c[3], "CPU");
    EXPECT_EQ(c[4], "1");
    EXPECT_EQ(c[5], tests[i]);
    std::smatch m;
    ASSERT_TRUE(std::regex_match(c[6], m, speed)) << c[6];
    EXPECT_GT(std::stod(m[1]), 0.0);
  }
}

TEST(BenchCli, JsonIsAnArrayWithLlamaBenchFields) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q8_0.gguf");
  const auto r = run_latte("bench -m " + fixture() + " -p 16 -n 4 -r 2 -d 0,8 -t 1,2 -o json", /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 8u);
  for (const char* field : {"n_prompt", "n_gen", "n_depth", "n_threads", "avg_ts", "stddev_ts", "model_size",
                            "model_n_params", "avg_ns", "samples_ts", "model_filename", "model_type", "test_time"})
    for (const auto& o : j) EXPECT_TRUE(o.contains(field)) << field;
  const int expect[8][4] = {{16, 0, 0, 1}, {0, 4, 0, 1}, {16, 0, 8, 1}, {0, 4, 8, 1},
                            {16, 0, 0, 2}, {0, 4, 0, 2}, {16, 0, 8, 2}, {0, 4, 8, 2}};
  for (size_t i = 0; i < 8; ++i) {
    const auto& o = j[i];
    EXPECT_EQ(o["n_prompt"], expect[i][0]);
    EXPECT_EQ(o["n_gen"], expect[i][1]);
    EXPECT_EQ(o["n_depth"], expect[i][2]);
    EXPECT_EQ(o["n_threads"], expect[i][3]);
    EXPECT_GT(o["avg_ts"].get<double>(), 0.0);
    EXPECT_GE(o["stddev_ts"].get<double>(), 0.0);
    EXPECT_EQ(o["samples_ts"].size(), 2u);
    EXPECT_EQ(o["model_size"], fixture_tensor_bytes());
    EXPECT_GT(o["model_n_params"].get<int64_t>(), 0);
    EXPECT_EQ(o["model_type"], "deepseek2 Q8_0");
    EXPECT_FALSE(o.contains("roof_pct"));
  }
}

TEST(BenchCli, RooflineAddsTheBoundAndAPercentColumn) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q8_0.gguf");
  const auto md = run_latte("bench -m " + fixture() + " -p 8 -n 4 -r 1 -t 1 --roofline --roofline-mib 64",
                            /*merge_stderr=*/false);
  ASSERT_EQ(md.exit_code, 0) << md.out;
  EXPECT_NE(md.out.find("DRAM read bandwidth: "), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("weights read per generated token: "), std::string::npos) << md.out;
  const std::vector<std::string> lines = table_lines(md.out);
  ASSERT_EQ(lines.size(), 4u) << md.out;
  EXPECT_EQ(cells(lines[0]).back(), "% roof");
  EXPECT_EQ(cells(lines[2]).size(), 7u) << "no % for pp: " << lines[2];
  EXPECT_TRUE(std::regex_match(cells(lines[3]).back(), std::regex(R"([0-9]+\.[0-9]%)"))) << lines[3];

  const auto js = run_latte("bench -m " + fixture() + " -p 0 -n 4 -r 1 -t 1 --roofline --roofline-mib 64 -o json",
                            /*merge_stderr=*/false);
  ASSERT_EQ(js.exit_code, 0) << js.out;
  const nlohmann::json j = nlohmann::json::parse(js.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_GT(j[0]["dram_read_gbs"].get<double>(), 0.0);
  EXPECT_GT(j[0]["weight_bytes_per_token"].get<double>(), 0.0);
  EXPECT_GT(j[0]["roof_ts"].get<double>(), 0.0);
  EXPECT_NEAR(j[0]["roof_pct"].get<double>(), 100.0 * j[0]["avg_ts"].get<double>() / j[0]["roof_ts"].get<double>(),
              1e-9);
}

// --profile: after the speeds, one table per step size, whose rows name the weights' roles and
// types, and a total row.
TEST(BenchCli, ProfileTablesFollowTheSpeeds) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q8_0.gguf");
  const auto md = run_latte("bench -m " + fixture() + " -p 8 -n 4 -r 1 -t 2 --profile", /*merge_stderr=*/false);
  ASSERT_EQ(md.exit_code, 0) << md.out;
  const size_t decode = md.out.find("decode steps (1 token): "), prefill = md.out.find("steps of 8 tokens: ");
  ASSERT_NE(decode, std::string::npos) << md.out;
  ASSERT_NE(prefill, std::string::npos) << md.out;
  EXPECT_LT(md.out.find("tg4"), decode) << "the speeds come first";
  for (const char* row : {"| mul_mat attn_kv_a_mqa q8_0 |", "| mul_mat_id ffn_up_exps q8_0 |", "| rms_norm |",
                          "| mul_mat output q8_0 |", "| all | |"})
    EXPECT_NE(md.out.find(row, decode), std::string::npos) << row << "\n" << md.out;

  const auto js = run_latte("bench -m " + fixture() + " -p 0 -n 4 -r 1 --profile -o json");
  EXPECT_NE(js.exit_code, 0);
  EXPECT_NE(js.out.find("--profile prints Markdown tables"), std::string::npos) << js.out;
}

// A MoE fixture and a budget that pages its routed experts: at the default context and batch its
// resident part and work buffers take about 67 MiB (latte info --plan), so 67.5M leaves an expert
// cache for some of its 48 experts, and each token reads some from the file.
constexpr const char* kMoeFixture = "fixtures/ds3-tiny-q4_0.gguf";
constexpr const char* kPagingBudget = "67.5M";
constexpr uint64_t kPagingBudgetBytes = uint64_t{135} << 19;  // 67.5 MiB

std::string sweep_args(const std::string& extra) {
  return "bench -m " + (latte::testing::shared_dir() / kMoeFixture).string() + " --mem-budget " + kPagingBudget +
         ",none -p 8 -n 2 -r 1 -t 1 " + extra;
}

TEST(BenchCli, MemBudgetListRunsTheTestsOncePerBudgetInATableColumn) {
  LATTE_REQUIRE_SHARED(kMoeFixture);
  const auto r = run_latte_apart(sweep_args(""));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = table_lines(r.out);
  ASSERT_EQ(lines.size(), 6u) << r.out;  // header, rule, 2 tests x 2 budgets
  EXPECT_EQ(cells(lines[0]),
            (std::vector<std::string>{"model", "size", "params", "backend", "threads", "mem", "test", "t/s"}));
  const std::vector<std::pair<std::string, std::string>> rows = {
      {kPagingBudget, "pp8"}, {kPagingBudget, "tg2"}, {"none", "pp8"}, {"none", "tg2"}};
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<std::string> c = cells(lines[i + 2]);
    ASSERT_EQ(c.size(), 8u) << lines[i + 2];
    EXPECT_EQ(c[5], rows[i].first) << lines[i + 2];
    EXPECT_EQ(c[6], rows[i].second) << lines[i + 2];
  }
  // A note after each paged row, none after the rows without a cache.
  const std::regex note(R"(note: (pp8|tg2): expert cache \(.*; [0-9.]+ [kMG]?B read per token \(timed runs)");
  EXPECT_EQ(std::distance(std::sregex_iterator(r.err.begin(), r.err.end(), note), std::sregex_iterator()), 2) << r.err;
}

TEST(BenchCli, MemBudgetListGivesEachJsonRowItsBudgetAndTheExpertCache) {
  LATTE_REQUIRE_SHARED(kMoeFixture);
  const auto r = run_latte(sweep_args("-o json"), /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 4u) << r.out;
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(j[i]["n_gen"], i == 1 ? 2 : 0);
    EXPECT_EQ(j[i]["mem_budget"], kPagingBudgetBytes);
    const nlohmann::json& cache = j[i]["expert_cache"];
    ASSERT_TRUE(cache.is_object()) << j[i];
    EXPECT_GT(cache["bytes_per_token"].get<double>(), 0.0) << cache;
    EXPECT_GE(cache["hit_rate"].get<double>(), 0.0);
    EXPECT_LE(cache["hit_rate"].get<double>(), 1.0);
    EXPECT_GT(cache["slots"].get<int64_t>(), 0);
    EXPECT_GT(cache["read_mb_per_s"].get<double>(), 0.0);
    EXPECT_GE(cache["wait_seconds"].get<double>(), 0.0);
    EXPECT_TRUE(cache["prefetch_accuracy"].is_null() || cache["prefetch_accuracy"].is_number()) << cache;
  }
  for (size_t i = 2; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(j[i]["mem_budget"].is_null()) << j[i];
    EXPECT_TRUE(j[i]["expert_cache"].is_null()) << j[i];
  }
}

TEST(BenchCli, BadInputIsAOneLineError) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q8_0.gguf");
  struct Case {
    std::string args, expect;
  };
  const std::string m = "bench -m " + fixture();
  const Case cases[] = {
      {m + " -o xml", "-o 'xml'"},
      {m + " -p -1", "-p must be >= 0 (got -1)"},
      {m + " -d 0,-8", "-d must be >= 0 (got -8)"},
      {m + " -r 0", "-r must be >= 1 (got 0)"},
      {m + " -t 0", "-t must be >= 1 (got 0)"},
      {m + " -p 0 -n 0", "nothing to run"},
      {m + " -p abc", "-p: 'abc' is not an integer"},
      {m + " --cache-type q5_k", "--cache-type"},
      {m + " --bogus", "--bogus"},
      {m + " --mem-budget 4G,abc", "--mem-budget 'abc' is not a size (e.g. 16G)"},
      {m + " --mem-budget 4G,,6G", "--mem-budget '4G,,6G' has an empty item"},
      {"bench -m /nonexistent/model.gguf", "/nonexistent/model.gguf"},
  };
  for (const Case& c : cases) {
    const auto r = run_latte(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << " -> " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.args << " -> " << r.out;
  }
}

}  // namespace test_bench_cli
