// The job of one process (src/parallel/job.h) that latte is without mpirun, the hashes the ranks
// compare, and the expert ranges the ranks divide among them (src/model/expert_share.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
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

}  // namespace test_job
