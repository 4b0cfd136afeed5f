// The routed experts' cache (src/model/expert_pager.h) on a MoE fixture: logits bit-identical to
// the run without a budget whatever the cache holds (one slot, so most experts come from the
// mapping; a few slots, evicting every token; every expert), over a prompt and decode steps on two
// threads; whatever the experts read ahead are (the graph's guess, a wrong one, none) and however
// slow the reads; reads, evictions, hits and guesses counted; the least often used expert evicted
// first; and a read that fails, comes up short or finds the file changed is an error naming the
// file, not a wrong answer.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ggml-like/core/error.h"
#include "src/model/expert_pager.h"
#include "src/model/model.h"
#include "src/runtime/session.h"
#include "tests/support/test_support.h"

namespace test_expert_pager {

namespace fs = std::filesystem;
constexpr const char* kFixture = "fixtures/ds3-tiny-q4_0.gguf";

std::string fixture() { return (latte::testing::shared_dir() / kFixture).string(); }

// A prompt of 12 tokens, then 6 decode steps: every logit, in order.
std::vector<float> run(const latte::Model& model) {
  latte::SessionOptions o;
  o.n_threads = 2;
  o.n_ctx = 64;
  latte::Session session(model, o);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 12; ++i) prompt.push_back(static_cast<int32_t>(1 + (i * 37) % 200));
  std::vector<float> out = session.eval(prompt);
  for (int i = 0; i < 6; ++i) {
    const int32_t t = static_cast<int32_t>(3 + i * 11);
    const std::vector<float> step = session.eval(std::span<const int32_t>(&t, 1));
    out.insert(out.end(), step.begin(), step.end());
  }
  return out;
}

latte::ModelOptions with_cache(std::optional<size_t> bytes) {
  latte::ModelOptions o;
  o.repack = false;  // the experts a pager holds keep the file's layout: compare like with like
  o.expert_cache = bytes;
  return o;
}

size_t slot_bytes(const std::string& path) {
  return latte::Model(path, with_cache(size_t{1})).expert_pager()->slot_bytes();
}

TEST(ExpertPager, LogitsAreBitIdenticalForEveryCacheSize) {
  LATTE_REQUIRE_SHARED(kFixture);
  const std::string path = fixture();
  const std::vector<float> want = run(latte::Model(path, with_cache(std::nullopt)));
  const latte::Model probe(path, with_cache(size_t{1}));
  const latte::Hparams& hp = probe.hparams();
  const int64_t experts = hp.moe.n_expert * (hp.n_layer - hp.moe.n_leading_dense);
  const size_t slot = slot_bytes(path);
  for (const int64_t slots : {int64_t{1}, hp.moe.n_expert_used + 1, experts}) {
    SCOPED_TRACE(std::to_string(slots) + " slots");
    const latte::Model model(path, with_cache(static_cast<size_t>(slots) * slot));
    const latte::ExpertPager& pager = *model.expert_pager();
    ASSERT_EQ(pager.slots(), slots);
    const std::vector<float> got = run(model);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << "not bit-identical";
    const latte::ExpertPager::Stats& s = pager.stats();
    EXPECT_GT(s.misses, 0);
    EXPECT_GT(s.bytes_read, 0u);
    if (slots == 1) {
      EXPECT_GT(s.mapped, 0) << "a node names more experts than one slot holds";
    }
    if (slots == hp.moe.n_expert_used + 1) {
      EXPECT_GT(s.misses, slots) << "evictions";
    }
    if (slots > hp.moe.n_expert_used) {
      EXPECT_GT(s.predicted, 0) << "pre-gating guessed the next layers' experts";
      EXPECT_GT(s.predicted_right, 0);
    }
    if (slots == experts) {
      EXPECT_EQ(s.mapped, 0);
      EXPECT_LE(s.misses, experts) << "each expert read once at most";
      EXPECT_GT(s.hits, 0);
    }
  }
}

// Experts read ahead on the graph's guess, on a wrong one (the experts it did not name) and on
// none, with reads slower than the computation so that a layer meets its experts still being read:
// the same logits each way.
TEST(ExpertPager, WhateverIsReadAheadTheLogitsAreTheSame) {
  LATTE_REQUIRE_SHARED(kFixture);
  const std::string path = fixture();
  const std::vector<float> want = run(latte::Model(path, with_cache(std::nullopt)));
  const size_t slot = slot_bytes(path);
  using Guess = latte::ExpertPager::GuessFn;
  const Guess wrong = [](int, std::span<const int32_t> likely) {
    std::vector<int32_t> others;
    for (int32_t e = 0; e < 16 && others.size() < likely.size(); ++e)
      if (std::find(likely.begin(), likely.end(), e) == likely.end()) others.push_back(e);
    return others;
  };
  const Guess none = [](int, std::span<const int32_t>) { return std::vector<int32_t>{}; };
  enum class Expect { kMostlyRight, kMostlyWrong, kNothingAhead };
  const struct {
    const char* what;
    Guess guess;
    Expect expect;
  } cases[] = {{"the graph's guess", nullptr, Expect::kMostlyRight},
               {"a wrong guess", wrong, Expect::kMostlyWrong},
               {"no guess", none, Expect::kNothingAhead}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const latte::Model model(path, with_cache(24 * slot));
    latte::ExpertPager& pager = *model.expert_pager();
    pager.set_guess_for_testing(c.guess);
    pager.set_read_for_testing([](int fd, void* buf, size_t n, off_t offset) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a disk slower than the computation
      return ::pread(fd, buf, n, offset);
    });
    const std::vector<float> got = run(model);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << "not bit-identical";
    const latte::ExpertPager::Stats s = pager.stats();
    switch (c.expect) {
      case Expect::kMostlyRight:
        EXPECT_GT(s.prefetched, 0);
        EXPECT_GT(s.predicted_right, s.predicted / 2) << "the router's guess is mostly right";
        break;
      case Expect::kMostlyWrong:
        EXPECT_GT(s.prefetched, 0);
        EXPECT_LT(s.predicted_right, s.predicted / 2);
        break;
      case Expect::kNothingAhead: EXPECT_EQ(s.prefetched, 0); break;
    }
  }
}

// Two slots; expert 0 of a layer used in steps 1, 2 and 5, experts 1 and 2 once each in steps 3
// and 4. At step 4, LFU evicts expert 1 (used once) and keeps 0 for step 5; LRU evicts 0 (used
// longest ago) and reads it again.
TEST(ExpertPager, LeastFrequentEvictionKeepsTheExpertUsedMostOften) {
  LATTE_REQUIRE_SHARED(kFixture);
  const std::string path = fixture();
  const latte::Model model(path, with_cache(std::nullopt));
  const latte::ModelWeights& w = model.weights();
  const latte::LayerWeights& layer = w.layers.back();
  ggl::Tensor leaf;
  leaf.data = const_cast<uint8_t*>(layer.ffn_gate_exps->data);  // the pager only looks it up
  std::vector<const uint8_t*> at(static_cast<size_t>(layer.ffn_gate_exps->ne[2]));
  for (const auto eviction :
       {latte::ExpertPager::Eviction::kLeastFrequent, latte::ExpertPager::Eviction::kLeastRecent}) {
    latte::ExpertPager::Options o;
    o.eviction = eviction;
    o.prefetch = false;
    latte::ExpertPager pager(model.file(), w, 2 * slot_bytes(path), o);
    for (const int32_t e : {0, 0, 1, 2, 0}) pager.acquire(leaf, std::span<const int32_t>(&e, 1), at);
    const latte::ExpertPager::Stats s = pager.stats();
    EXPECT_EQ(s.steps, 5);
    if (eviction == latte::ExpertPager::Eviction::kLeastFrequent) {
      EXPECT_EQ(s.hits, 2) << "expert 0 kept for step 5";
    } else {
      EXPECT_EQ(s.hits, 1) << "LRU read expert 0 again";
    }
  }
}

// The errors a read can meet, through the test hook: each stops the evaluation with one message.
TEST(ExpertPager, AFailedOrShortReadIsAnErrorNamingTheFile) {
  LATTE_REQUIRE_SHARED(kFixture);
  const std::string path = fixture();
  const size_t slot = slot_bytes(path);
  struct Case {
    const char* what;
    latte::ExpertPager::ReadFn read;
    std::string error_part;
  };
  const Case cases[] = {
      {"EIO",
       [](int, void*, size_t, off_t) -> ssize_t {
         errno = EIO;
         return -1;
       },
       ": cannot read expert "},
      {"end of file", [](int, void*, size_t, off_t) -> ssize_t { return 0; }, ") ends early: the file is shorter"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const latte::Model model(path, with_cache(4 * slot));
    model.expert_pager()->set_read_for_testing(c.read);
    try {
      run(model);
      ADD_FAILURE() << "no error";
    } catch (const ggl::Error& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
      EXPECT_NE(message.find(c.error_part), std::string::npos) << message;
      if (std::string(c.what) == "EIO") {
        EXPECT_NE(message.find(std::strerror(EIO)), std::string::npos) << message;
      }
    }
  }
}

TEST(ExpertPager, AFileChangedOnDiskIsAnError) {
  LATTE_REQUIRE_SHARED(kFixture);
  const fs::path copy = fs::temp_directory_path() / ("latte-pager-" + std::to_string(::getpid()) + ".gguf");
  fs::copy_file(fixture(), copy, fs::copy_options::overwrite_existing);
  {
    const latte::Model model(copy.string(), with_cache(2 * slot_bytes(copy.string())));
    run(model);                                                      // fine as it is
    const struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 0}};  // a new modification time
    ASSERT_EQ(::utimensat(AT_FDCWD, copy.c_str(), times, 0), 0);
    try {
      run(model);
      ADD_FAILURE() << "no error";
    } catch (const ggl::Error& e) {
      EXPECT_EQ(std::string(e.what()), copy.string() +
                                           ": the file changed on disk since it was loaded (size or modification "
                                           "time): load it again");
    }
  }
  fs::remove(copy);
}

}  // namespace test_expert_pager
