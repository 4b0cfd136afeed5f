// Expert parallelism's memory plan (src/placement/expert_ranks.h): N ranks divide every layer's
// routed experts into contiguous ranges whose sizes differ by at most one, together covering each
// expert once; a rank's bytes are its share of the experts plus the dense part; and `latte info
// --plan --ranks N` prints a line a rank, against the budget.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "ggml-like/core/error.h"
#include "src/placement/expert_ranks.h"
#include "tests/support/test_support.h"

namespace test_expert_ranks {

TEST(ExpertRanks, ContiguousRangesWithinOneExpertOfEachOther) {
  latte::RamPlan ram;
  ram.resident = 1000;
  ram.work = 24;
  ram.experts = 64 * 26 * 100;  // 26 layers of 64 experts of 100 bytes
  for (const int n : {1, 2, 3, 4, 5, 7, 64}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    const std::vector<latte::RankShare> shares = latte::split_experts(ram, 64, n);
    ASSERT_EQ(shares.size(), static_cast<size_t>(n));
    int64_t next = 0, least = 64, most = 0;
    size_t bytes = 0;
    for (const latte::RankShare& s : shares) {
      EXPECT_EQ(s.first_expert, next) << "contiguous, in rank order";
      next += s.experts;
      least = std::min(least, s.experts);
      most = std::max(most, s.experts);
      EXPECT_EQ(s.expert_bytes, static_cast<size_t>(s.experts) * 26 * 100);
      EXPECT_EQ(s.resident, 1024u) << "every rank holds the dense part";
      bytes += s.expert_bytes;
    }
    EXPECT_EQ(next, 64) << "every expert once";
    EXPECT_LE(most - least, 1);
    EXPECT_EQ(bytes, ram.experts);
  }
  EXPECT_THROW(latte::split_experts(ram, 64, 0), ggl::Error);
}

constexpr const char* kModel = "fixtures/ds2-lite-27l-q8_0.gguf";

TEST(ExpertRanks, InfoPlanPrintsEachRanksShare) {
  LATTE_REQUIRE_SHARED(kModel);
  const std::string model = latte::testing::shell_quoted(latte::testing::shared_dir() / kModel);
  const auto r = latte::testing::run_latte_apart("info " + model + " --plan --mem-budget 16G --ranks 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::regex line(
      R"(rank (\d): experts (\d+)-(\d+) of each layer's (\d+) \(.+\) \+ .+ resident = .+: fits a 16.00 GiB budget)");
  int64_t next = 0, n_expert = 0;
  int ranks = 0;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), line); it != std::sregex_iterator(); ++it, ++ranks) {
    EXPECT_EQ(std::stoi((*it)[1]), ranks);
    EXPECT_EQ(std::stoll((*it)[2]), next);
    next = std::stoll((*it)[3]) + 1;
    n_expert = std::stoll((*it)[4]);
  }
  EXPECT_EQ(ranks, 3) << r.out;
  EXPECT_EQ(next, n_expert) << r.out;

  const auto tight = latte::testing::run_latte_apart("info " + model + " --plan --mem-budget 1K --ranks 2");
  ASSERT_EQ(tight.exit_code, 0) << tight.err;
  EXPECT_NE(tight.out.find("rank 1: experts "), std::string::npos) << tight.out;
  EXPECT_NE(tight.out.find(": over a 1.00 KiB budget by "), std::string::npos) << tight.out;

  const auto zero = latte::testing::run_latte_apart("info " + model + " --plan --ranks 0");
  EXPECT_NE(zero.exit_code, 0);
  EXPECT_NE(zero.err.find("--ranks"), std::string::npos) << zero.err;
  const auto no_plan = latte::testing::run_latte_apart("info " + model + " --ranks 2");
  EXPECT_NE(no_plan.exit_code, 0);
  EXPECT_NE(no_plan.err.find("--ranks needs --plan"), std::string::npos) << no_plan.err;
}

}  // namespace test_expert_ranks
