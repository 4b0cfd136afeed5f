// The bench runner: which tests a set of lists expands to (llama-bench's order), the statistics
// of a result, and a real run on a fixture.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/core/error.h"
#include "src/bench/bench_report.h"
#include "src/bench/bench_runner.h"
#include "tests/support/test_support.h"

namespace test_bench_runner {

using latte::bench::BenchOptions;
using latte::bench::BenchResult;
using latte::bench::BenchTest;

std::vector<std::string> names(const std::vector<BenchTest>& tests) {
  std::vector<std::string> n;
  for (const BenchTest& t : tests) n.push_back(t.name() + " t" + std::to_string(t.threads));
  return n;
}

TEST(BenchRunner, ExpandsListsInLlamaBenchOrder) {
  BenchOptions o;
  o.n_prompt = {512, 1024};
  o.n_gen = {128};
  o.n_depth = {0, 4096};
  o.threads = {1, 2};
  EXPECT_EQ(names(latte::bench::expand_tests(o)),
            (std::vector<std::string>{"pp512 t1", "pp1024 t1", "tg128 t1", "pp512 @ d4096 t1", "pp1024 @ d4096 t1",
                                      "tg128 @ d4096 t1", "pp512 t2", "pp1024 t2", "tg128 t2", "pp512 @ d4096 t2",
                                      "pp1024 @ d4096 t2", "tg128 @ d4096 t2"}));
}

TEST(BenchRunner, ZeroSkipsAKindOfTestAndDefaultsArePhysicalCores) {
  BenchOptions o;
  o.n_prompt = {0};
  o.n_gen = {16};
  const std::vector<BenchTest> tests = latte::bench::expand_tests(o);
  ASSERT_EQ(tests.size(), 1u);
  EXPECT_EQ(tests[0].name(), "tg16");
  EXPECT_EQ(tests[0].threads, ggl::physical_core_count());
}

TEST(BenchRunner, RejectsBadLists) {
  auto expect_error = [](BenchOptions o, const std::string& what) {
    try {
      latte::bench::expand_tests(o);
      ADD_FAILURE() << "no error, expected " << what;
    } catch (const ggl::Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  BenchOptions o;
  o.n_prompt = {-1};
  expect_error(o, "-p -1");
  o = {};
  o.n_depth = {-5};
  expect_error(o, "-d -5");
  o = {};
  o.threads = {0};
  expect_error(o, "-t 0");
  o = {};
  o.repetitions = 0;
  expect_error(o, "-r 0");
  o = {};
  o.n_prompt = {0};
  o.n_gen = {0};
  expect_error(o, "nothing to run");
}

TEST(BenchRunner, MeanAndSampleStddevOfTokensPerSecond) {
  BenchResult r{{0, 4, 0, 1}, {1.0, 2.0, 4.0}};  // tg4 in 1, 2 and 4 seconds: 4, 2, 1 t/s
  EXPECT_EQ(r.samples_ts(), (std::vector<double>{4.0, 2.0, 1.0}));
  EXPECT_DOUBLE_EQ(r.avg_ts(), 7.0 / 3.0);
  // Sample (n - 1) standard deviation.
  const double m = 7.0 / 3.0;
  EXPECT_DOUBLE_EQ(r.stddev_ts(), std::sqrt(((4 - m) * (4 - m) + (2 - m) * (2 - m) + (1 - m) * (1 - m)) / 2.0));
  EXPECT_DOUBLE_EQ(r.avg_seconds(), 7.0 / 3.0);
  BenchResult one{{16, 0, 0, 1}, {0.5}};
  EXPECT_DOUBLE_EQ(one.avg_ts(), 32.0);
  EXPECT_EQ(one.stddev_ts(), 0.0);
}

TEST(BenchRunner, RunsEveryTestOnAFixture) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q8_0.gguf");
  const latte::Model model((latte::testing::shared_dir() / "fixtures/ds2-v2-tiny-q8_0.gguf").string());
  BenchOptions o;
  o.n_prompt = {8};
  o.n_gen = {3};
  o.n_depth = {0, 5};
  o.threads = {1};
  o.repetitions = 2;
  std::vector<BenchResult> results;
  std::vector<std::string> status;
  latte::bench::run_bench(
      model, o, [&](const BenchResult& r) { results.push_back(r); },
      [&](const std::string& s) { status.push_back(s); });
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0].test.name(), "pp8");
  EXPECT_EQ(results[3].test.name(), "tg3 @ d5");
  for (const BenchResult& r : results) {
    ASSERT_EQ(r.seconds.size(), 2u);
    for (double s : r.seconds) EXPECT_GT(s, 0.0);
    EXPECT_GT(r.avg_ts(), 0.0);
  }
  // The depth is filled once for the d5 group.
  EXPECT_EQ(std::count(status.begin(), status.end(), "filling the cache with 5 tokens (1 threads)"), 1);
}

// With an expert cache, a result carries its figures over the timed runs only, not the depth fill's
// nor the warm-up step's: a decode step asks each MoE layer for n_expert_used experts.
TEST(BenchRunner, ExpertCacheFiguresAreThoseOfTheTimedRuns) {
  constexpr const char* kFixture = "fixtures/ds3-tiny-q4_0.gguf";
  LATTE_REQUIRE_SHARED(kFixture);
  const std::string path = (latte::testing::shared_dir() / kFixture).string();
  latte::ModelOptions mo;
  mo.expert_cache = size_t{1};  // no whole slot: the probe tells how large one is
  const latte::Model probe(path, mo);
  // n_expert_used + 1 slots: every step evicts, so the timed runs read experts too.
  const int64_t slots = probe.hparams().moe.n_expert_used + 1;
  mo.expert_cache = static_cast<size_t>(slots) * probe.expert_pager()->slot_bytes();
  const latte::Model model(path, mo);
  ASSERT_TRUE(model.expert_pager());
  BenchOptions o;
  o.n_prompt = {0};
  o.n_gen = {3};
  o.n_depth = {2};
  o.threads = {1};
  o.repetitions = 2;
  std::vector<BenchResult> results;
  latte::bench::run_bench(model, o, [&](const BenchResult& r) { results.push_back(r); });
  ASSERT_EQ(results.size(), 1u);
  ASSERT_TRUE(results[0].expert_cache);
  const latte::ExpertPager::Stats& timed = results[0].expert_cache->stats;
  const latte::Hparams& hp = model.hparams();
  EXPECT_EQ(timed.asked(), 3 * 2 * (hp.n_layer - hp.moe.n_leading_dense) * hp.moe.n_expert_used);
  EXPECT_GT(model.expert_pager()->stats().asked(), timed.asked()) << "the fill and the warm-up asked too";
  EXPECT_GT(timed.bytes_read, 0u);
  EXPECT_DOUBLE_EQ(results[0].expert_bytes_per_token(), static_cast<double>(timed.bytes_read) / 6.0);
  EXPECT_EQ(results[0].expert_cache->slots, slots);
  EXPECT_NE(latte::bench::expert_cache_note(results[0]).find("read per token (timed runs"), std::string::npos);
}

// Whole pages inside the output head's data (read in full by every decode step): the test checks
// they left memory before the timed run that must read them back.
struct PageRange {
  uint8_t* begin = nullptr;
  size_t bytes = 0;
};
PageRange output_head_pages(const latte::Model& model) {
  const auto& tensors = model.file().tensors();
  const auto head =
      std::find_if(tensors.begin(), tensors.end(), [](const auto& t) { return t.name == "output.weight"; });
  if (head == tensors.end()) return {};
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(head->data);
  const uintptr_t first = (start + page - 1) / page * page, last = (start + head->nbytes) / page * page;
  if (last <= first) return {};
  return {reinterpret_cast<uint8_t*>(first), last - first};
}
bool any_page_resident(const PageRange& r) {
  std::vector<unsigned char> in(r.bytes / static_cast<size_t>(sysconf(_SC_PAGESIZE)));
  if (mincore(r.begin, r.bytes, in.data()) != 0) return true;
  return std::any_of(in.begin(), in.end(), [](unsigned char c) { return (c & 1) != 0; });
}

// Weights dropped from memory between the warm-up and a timed run come back from disk during it: the
// result counts those page faults (cmd_bench then warns that the figure includes disk reads).
TEST(BenchRunner, CountsPageFaultsThatReadFromDisk) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q8_0.gguf");
  // A private, written-back copy: the kernel keeps pages that other processes (tests running
  // beside this one) also map, and dirty ones.
  const std::filesystem::path copy =
      std::filesystem::temp_directory_path() / ("latte-page-faults-" + std::to_string(getpid()) + ".gguf");
  std::filesystem::copy_file(latte::testing::shared_dir() / "fixtures/ds2-v2-tiny-q8_0.gguf", copy,
                             std::filesystem::copy_options::overwrite_existing);
  struct Remove {
    std::filesystem::path p;
    ~Remove() { std::filesystem::remove(p); }
  } remove{copy};
  const int fd = open(copy.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fsync(fd), 0);
  struct Close {
    int fd;
    ~Close() { close(fd); }
  } close_fd{fd};
  const latte::Model model(copy.string());
  const PageRange pages = output_head_pages(model);
  // The whole mapping: a large folio of the page cache stays while any of its pages is mapped.
  const ggl::TensorInfo& first = model.file().tensors().front();
  const uint8_t* base = first.data - model.file().data_offset() - first.offset;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapped = (model.file().file_size() + page - 1) / page * page;
  ASSERT_GT(pages.bytes, 0u);
  BenchOptions o;
  o.n_prompt = {0};
  o.n_gen = {2};
  o.threads = {1};
  o.repetitions = 1;
  bool paged_out = false;
  std::vector<BenchResult> results;
  latte::bench::run_bench(
      model, o, [&](const BenchResult& r) { results.push_back(r); },
      [&](const std::string& s) {
        if (s.find("run 1/") == std::string::npos) return;
        // Unmap every page of the file from this process, then drop them from the page cache:
        // the next access reads the file.
        paged_out = madvise(const_cast<uint8_t*>(base), mapped, MADV_DONTNEED) == 0 &&
                    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0 && !any_page_resident(pages);
      });
  ASSERT_EQ(results.size(), 1u);
  if (!paged_out) GTEST_SKIP() << "the kernel kept the weight pages resident (e.g. the temporary directory is tmpfs)";
  EXPECT_GT(results[0].major_faults, 0);
  EXPECT_NE(latte::bench::disk_reads_warning(results[0]).find("page faults read from disk"), std::string::npos);
}

TEST(BenchReport, SizesAndParamsAsLlamaBenchPrintsThem) {
  EXPECT_EQ(latte::bench::format_size(uint64_t{8} * 1024 * 1024 * 1024 + 300'000'000), "8.28 GiB");
  EXPECT_EQ(latte::bench::format_size(6537376), "6.23 MiB");
  EXPECT_EQ(latte::bench::format_params(15706484224), "15.71 B");
  EXPECT_EQ(latte::bench::format_params(3'250'000), "3.25 M");
}

}  // namespace test_bench_runner
