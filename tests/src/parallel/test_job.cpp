// The job of one process (src/parallel/job.h) that latte is without mpirun, the hashes the ranks
// compare, and the expert ranges the ranks divide among them (src/model/expert_share.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <string>

#include "ggml-like/core/error.h"
#include "src/model/expert_share.h"
#include "src/parallel/job.h"

namespace test_job {

TEST(Job, WithoutMpirunItIsAJobOfOne) {
  latte::Job& job = latte::Job::get();
  EXPECT_EQ(job.rank(), 0);
  EXPECT_EQ(job.size(), 1);
  EXPECT_TRUE(job.alone());
  EXPECT_EQ(job.expert_exchange(), nullptr);
  EXPECT_EQ(job.from_rank0(42), 42u);
  EXPECT_NO_THROW(job.check_same("anything", 7));
}

TEST(Job, FileHeadHashSeesTheHeadAndTheSize) {
  const auto dir = std::filesystem::temp_directory_path();
  const auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return (dir / name).string();
  };
  const std::string a = write("latte-job-a", "GGUF header|data one");
  const std::string b = write("latte-job-b", "GGUF header|data two");
  const std::string c = write("latte-job-c", "GGUF header|data one!");
  const std::string d = write("latte-job-d", "GGUF HEADER|data one");
  EXPECT_EQ(latte::file_head_hash(a, 11), latte::file_head_hash(b, 11)) << "same head and size";
  EXPECT_NE(latte::file_head_hash(a, 11), latte::file_head_hash(c, 11)) << "another size";
  EXPECT_NE(latte::file_head_hash(a, 11), latte::file_head_hash(d, 11)) << "another head";
  EXPECT_THROW(latte::file_head_hash((dir / "latte-job-none").string(), 11), ggl::Error);
  for (const std::string& f : {a, b, c, d}) std::filesystem::remove(f);
}

TEST(ExpertShare, RanksDivideTheExpertsIntoRangesThatDifferByOneAtMost) {
  for (int64_t E : {8, 64, 160, 256})
    for (int ranks = 1; ranks <= 7; ++ranks) {
      int32_t next = 0;
      for (int r = 0; r < ranks; ++r) {
        const ggl::ExpertRange range = latte::rank_experts(E, r, ranks);
        EXPECT_EQ(range.first, next) << "contiguous";
        const int64_t size = range.end - range.first;
        EXPECT_TRUE(size == E / ranks || size == E / ranks + 1) << E << " experts, rank " << r << " of " << ranks;
        for (int64_t e = range.first; e < range.end; ++e) EXPECT_EQ(latte::expert_owner(e, E, ranks), r);
        next = range.end;
      }
      EXPECT_EQ(next, E) << "every expert";
    }
  EXPECT_THROW(latte::rank_experts(8, 2, 2), ggl::Error);
  EXPECT_THROW(latte::expert_owner(8, 8, 2), ggl::Error);
}

// The heaviest rank's share of the counts.
double heaviest(const std::vector<double>& counts, int ranks, const std::function<int(int64_t)>& owner) {
  std::vector<double> load(static_cast<size_t>(ranks), 0.0);
  for (size_t e = 0; e < counts.size(); ++e) load[static_cast<size_t>(owner(static_cast<int64_t>(e)))] += counts[e];
  return *std::max_element(load.begin(), load.end());
}

TEST(ExpertShare, ASplitByRoutingCountsKeepsTheSharesAndEvensTheLoad) {
  for (int ranks = 2; ranks <= 5; ++ranks) {
    // Layer 0 dense; layer 1's hot experts all in the first range; layer 2 even.
    std::vector<std::vector<double>> counts(3);
    for (int64_t e = 0; e < 64; ++e) {
      counts[1].push_back(e < 10 ? 1000.0 : 10.0 + static_cast<double>(e % 7));
      counts[2].push_back(100.0);
    }
    const latte::ExpertSplit split = latte::ExpertSplit::balanced(counts, ranks);
    EXPECT_FALSE(split.contiguous());
    for (int64_t layer = 1; layer <= 2; ++layer) {
      const std::vector<double>& c = counts[static_cast<size_t>(layer)];
      const auto set_owner = [&](int64_t e) {
        for (int r = 0; r < ranks; ++r)
          if (split.of(layer, 64, r, ranks).holds(e, 64)) return r;
        ADD_FAILURE() << "expert " << e << " of layer " << layer << " has no rank";
        return 0;
      };
      for (int r = 0; r < ranks; ++r) {
        const ggl::ExpertRange set = split.of(layer, 64, r, ranks), range = latte::rank_experts(64, r, ranks);
        int64_t n = 0;
        for (int64_t e = 0; e < 64; ++e) n += set.holds(e, 64);
        EXPECT_EQ(n, range.end - range.first) << "as many experts as the range, rank " << r << " of " << ranks;
        EXPECT_FALSE(set.all(64));
      }
      for (int64_t e = 0; e < 64; ++e) {  // exactly one rank each
        int holders = 0;
        for (int r = 0; r < ranks; ++r) holders += split.of(layer, 64, r, ranks).holds(e, 64);
        EXPECT_EQ(holders, 1) << "expert " << e;
      }
      const double total = std::accumulate(c.begin(), c.end(), 0.0);
      const double even = total / ranks, balanced = heaviest(c, ranks, set_owner);
      const double by_range = heaviest(c, ranks, [&](int64_t e) { return latte::expert_owner(e, 64, ranks); });
      EXPECT_LE(balanced, by_range);
      EXPECT_LE(balanced, even + 1000.0) << "within the heaviest expert of the even share";
      if (layer == 1) {
        EXPECT_LT(balanced, 0.75 * by_range) << ranks << " ranks";
      }
    }
    // A dense layer and a layer beyond the counts take the ranges.
    EXPECT_EQ(split.of(0, 64, 1, ranks).owner, nullptr);
    EXPECT_EQ(split.of(7, 64, 1, ranks).first, latte::rank_experts(64, 1, ranks).first);
    EXPECT_EQ(split.owners(), latte::ExpertSplit::balanced(counts, ranks).owners()) << "the same split every time";
    EXPECT_NE(split.owners(), latte::ExpertSplit().owners());
  }
  EXPECT_THROW(latte::ExpertSplit::balanced({{1.0, 2.0}}, 3), ggl::Error);  // 2 experts, 3 ranks
  EXPECT_THROW(latte::ExpertSplit::balanced({{1.0, 2.0}}, 0), ggl::Error);
}

}  // namespace test_job
