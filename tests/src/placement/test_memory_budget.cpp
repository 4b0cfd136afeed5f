// The RAM tier of the placement (src/placement/memory_budget.h): the limits Linux gives, read
// from directories laid out as /proc and /sys/fs/cgroup (cgroup v1 nested, v2, none), the default
// budget, and how a budget splits between the resident tensors and the routed experts' cache.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "src/placement/memory_budget.h"

namespace test_memory_budget {

namespace fs = std::filesystem;
using latte::Device;
using latte::PlacedTensor;
using latte::Placement;
using latte::TensorRole;

constexpr size_t kMiB = size_t{1} << 20;

// A directory standing for "/" with the given files, removed at the end.
class FakeRoot {
 public:
  FakeRoot()
      : dir_(fs::temp_directory_path() /
             ("latte-memroot-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++))) {
    fs::create_directories(dir_);
  }
  ~FakeRoot() { fs::remove_all(dir_); }
  void write(const std::string& path, const std::string& text) {
    fs::create_directories((dir_ / path).parent_path());
    std::ofstream(dir_ / path) << text;
  }
  std::string path() const { return dir_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path dir_;
};

constexpr const char* kMeminfo =
    "MemTotal:       24000000 kB\nMemFree:         1000000 kB\n"
    "MemAvailable:   20000000 kB\nBuffers:          100 kB\n";

TEST(MemoryLimits, CgroupV1TakesTheTightestOfTheCgroupAndItsParents) {
  FakeRoot root;
  root.write("proc/self/cgroup", "5:devices:/\n4:memory:/jobs/latte\n1:cpu:/\n");
  root.write("proc/meminfo", kMeminfo);
  root.write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");    // v1's "no limit"
  root.write("sys/fs/cgroup/memory/jobs/memory.limit_in_bytes", "6442450944\n");        // 6 GiB
  root.write("sys/fs/cgroup/memory/jobs/latte/memory.limit_in_bytes", "8589934592\n");  // 8 GiB
  const latte::MemoryLimits l = latte::read_memory_limits(root.path());
  ASSERT_TRUE(l.cgroup_limit);
  EXPECT_EQ(*l.cgroup_limit, size_t{6} << 30);
  ASSERT_TRUE(l.mem_available);
  EXPECT_EQ(*l.mem_available, size_t{20000000} * 1024);
  // The smaller of the two, less 5% of it.
  EXPECT_EQ(latte::default_memory_budget(l), (size_t{6} << 30) - (size_t{6} << 30) / 20);
}

TEST(MemoryLimits, CgroupV2AndNoLimit) {
  FakeRoot v2;
  v2.write("proc/self/cgroup", "0::/user.slice/run\n");
  v2.write("proc/meminfo", kMeminfo);
  v2.write("sys/fs/cgroup/user.slice/run/memory.max", "4294967296\n");
  v2.write("sys/fs/cgroup/user.slice/memory.max", "max\n");
  EXPECT_EQ(latte::read_memory_limits(v2.path()).cgroup_limit, size_t{4} << 30);

  FakeRoot unlimited;  // "max" everywhere: MemAvailable decides
  unlimited.write("proc/self/cgroup", "0::/a\n");
  unlimited.write("proc/meminfo", kMeminfo);
  unlimited.write("sys/fs/cgroup/a/memory.max", "max\n");
  const latte::MemoryLimits l = latte::read_memory_limits(unlimited.path());
  EXPECT_FALSE(l.cgroup_limit);
  const size_t available = size_t{20000000} * 1024;
  EXPECT_EQ(latte::default_memory_budget(l), available - available / 20);

  FakeRoot nothing;  // neither file: no budget
  EXPECT_FALSE(latte::default_memory_budget(latte::read_memory_limits(nothing.path())));
  // A small limit keeps a headroom of at least 256 MiB.
  EXPECT_EQ(latte::default_memory_budget({size_t{1} << 30, std::nullopt}), (size_t{1} << 30) - 256 * kMiB);
}

// Two MoE layers of 4 experts (8 MiB each: 32 MiB a layer) on the CPU,
// 18 MiB resident (embedding, head, attention and caches), and one layer's experts on the GPU (not the RAM's to hold).
Placement two_layers() {
  Placement p;
  p.n_layer = 3;
  const auto add = [&](const char* name, size_t mib, int layer, TensorRole role, Device d = Device::kCpu) {
    p.tensors.push_back({{name, mib * kMiB, layer, role}, d});
  };
  add("token_embd.weight", 6, -1, TensorRole::kEmbedding);
  add("output.weight", 6, -1, TensorRole::kOutputHead);
  for (int l = 0; l < 2; ++l) {
    add("attn", 2, l, TensorRole::kAttention);
    add("cache", 1, l, TensorRole::kCache);
    add("ffn_up_exps", 16, l, TensorRole::kRoutedExperts);
    add("ffn_down_exps", 16, l, TensorRole::kRoutedExperts);
  }
  add("ffn_up_exps", 16, 2, TensorRole::kRoutedExperts, Device::kGpu);
  add("attn", 2, 2, TensorRole::kAttention, Device::kGpu);
  return p;
}

TEST(RamPlan, TheBudgetLeftAfterTheResidentPartHoldsWholeExperts) {
  const Placement p = two_layers();
  // 18 MiB resident + 4 MiB work; 42 MiB left: 5 of the 8 experts.
  latte::RamPlan r = latte::plan_ram(p, 64 * kMiB, 4 * kMiB, 4, 2);
  EXPECT_EQ(r.resident, 18 * kMiB);
  EXPECT_EQ(r.experts, 64 * kMiB);
  EXPECT_EQ(r.expert_bytes, 8 * kMiB);
  EXPECT_EQ(r.expert_count, 8);
  EXPECT_EQ(r.expert_cache, 42 * kMiB);
  EXPECT_EQ(r.cache_experts, 5);
  EXPECT_TRUE(r.resident_fits());
  EXPECT_FALSE(r.all_experts_fit());
  // 2.5 of 4 experts a layer cached: each of 2 picks misses with probability 3/8, 8 MiB each,
  // in 2 layers: 12 MiB a token.
  EXPECT_DOUBLE_EQ(r.uniform_miss_bytes_per_token, 12.0 * kMiB);
  const std::string lines = latte::ram_plan_lines(r);
  EXPECT_NE(lines.find("ram: 18.00 MiB resident"), std::string::npos) << lines;
  EXPECT_NE(lines.find("holds 5 (62%)"), std::string::npos) << lines;
  EXPECT_EQ(lines.find("warning"), std::string::npos) << lines;

  r = latte::plan_ram(p, 100 * kMiB, 4 * kMiB, 4, 2);  // 76 MiB left: all 8
  EXPECT_TRUE(r.all_experts_fit());
  EXPECT_EQ(r.cache_experts, 8);
  EXPECT_DOUBLE_EQ(r.uniform_miss_bytes_per_token, 0.0);
  EXPECT_NE(latte::ram_plan_lines(r).find("all fit"), std::string::npos);

  r = latte::plan_ram(p, 20 * kMiB, 4 * kMiB, 4, 2);  // the resident part does not fit
  EXPECT_FALSE(r.resident_fits());
  EXPECT_EQ(r.expert_cache, 0u);
  EXPECT_EQ(r.cache_experts, 0);
  EXPECT_DOUBLE_EQ(r.uniform_miss_bytes_per_token, 2 * 2 * 8.0 * kMiB);
  EXPECT_NE(latte::ram_plan_lines(r).find("warning: the resident part and work buffers (22.00 MiB) do not fit"),
            std::string::npos)
      << latte::ram_plan_lines(r);
}

TEST(RamPlan, ADenseModelIsAllResident) {
  const Placement p = two_layers();
  const latte::RamPlan r = latte::plan_ram(p, 200 * kMiB, 0, 0, 0);
  EXPECT_EQ(r.resident, 82 * kMiB);  // no experts to stream: the expert tensors count as resident
  EXPECT_EQ(r.expert_count, 0);
  EXPECT_EQ(latte::ram_plan_lines(r).find("ram: routed experts"), std::string::npos);
}

}  // namespace test_memory_budget
