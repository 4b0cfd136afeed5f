// The sampling chain: greedy, seeds, top-k, top-p, min-p, temperature, repetition penalty,
// a 100k vocabulary, parameter validation and the shared CLI flags.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "ggml-like/core/error.h"
#include "src/sampling/sampler.h"
#include "src/cli/flags/sampling_flags.h"

namespace test_sampling {

using latte::Sampler;
using latte::SamplingParams;

std::vector<float> random_logits(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Only the named filter on: temperature 1, no top-k / top-p / min-p unless set by the caller.
SamplingParams plain(int64_t seed = 1) {
  SamplingParams p;
  p.temp = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

std::vector<int> histogram(Sampler& s, const std::vector<float>& logits, int draws) {
  std::vector<int> h(logits.size(), 0);
  for (int i = 0; i < draws; ++i) ++h[s.sample(logits)];
  return h;
}

std::vector<float> log_probs(std::initializer_list<double> p) {
  std::vector<float> v;
  for (double x : p) v.push_back(static_cast<float>(std::log(x)));
  return v;
}

TEST(Sampling, DefaultsAreThoseOfLlamaCpp) {
  SamplingParams p;
  EXPECT_FLOAT_EQ(p.temp, 0.8f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_FLOAT_EQ(p.repeat_penalty, 1.0f);
  EXPECT_EQ(p.repeat_last_n, 64);
  EXPECT_EQ(p.seed, -1);
}

TEST(Sampling, GreedyPicksArgmaxWithTiesToTheLowestId) {
  for (uint32_t trial = 0; trial < 20; ++trial) {
    auto logits = random_logits(1000, trial);
    SamplingParams p;
    p.temp = 0.0f;
    p.seed = trial;
    Sampler s(p);
    auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
    EXPECT_EQ(s.sample(logits), best);
  }
  SamplingParams p;
  p.temp = 0.0f;
  Sampler s(p);
  EXPECT_EQ(s.sample(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f}), 1);
  EXPECT_EQ(s.sample(std::vector<float>{NAN, 0.5f, NAN}), 1) << "NaN logits are never picked";
}

TEST(Sampling, SameSeedSameTokensDifferentSeedsDiffer) {
  auto logits = random_logits(1000, 5);
  auto run = [&](int64_t seed) {
    SamplingParams p;  // the default chain
    p.temp = 1.5f;
    p.top_k = 100;
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.sample(logits));
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
  EXPECT_EQ(Sampler(plain(7)).seed(), 7u);
  // -1 draws a 32-bit seed from the system (reported by seed() so -s can reproduce the run).
  EXPECT_NE(Sampler(plain(-1)).seed(), Sampler(plain(-1)).seed());
}

TEST(Sampling, TopKOneEqualsGreedy) {
  for (uint32_t trial = 0; trial < 20; ++trial) {
    auto logits = random_logits(5000, 100 + trial);
    SamplingParams p = plain(trial);
    p.top_k = 1;
    Sampler s(p);
    auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
    EXPECT_EQ(s.sample(logits), best);
  }
}

TEST(Sampling, TopKKeepsOnlyTheKBest) {
  std::vector<float> logits = {0.0f, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
  SamplingParams p = plain();
  p.top_k = 3;
  Sampler s(p);
  auto h = histogram(s, logits, 3000);
  EXPECT_EQ(h[0] + h[1] + h[2], 0);
  EXPECT_GT(h[3], 0);
  EXPECT_GT(h[4], 0);
  EXPECT_GT(h[5], 0);
}

TEST(Sampling, TopPKeepsTheSmallestSetReachingTheMass) {
  auto logits = log_probs({0.05, 0.5, 0.15, 0.3});  // sorted: 1 (0.5), 3 (0.3), 2 (0.15), 0 (0.05)
  {
    SamplingParams p = plain();
    p.top_p = 0.75f;  // 0.5 + 0.3 reaches it
    Sampler s(p);
    auto h = histogram(s, logits, 4000);
    EXPECT_EQ(h[0] + h[2], 0);
    EXPECT_NEAR(h[1] / 4000.0, 0.625, 0.04);  // renormalized 0.5 / 0.8
    EXPECT_NEAR(h[3] / 4000.0, 0.375, 0.04);
  }
  {
    SamplingParams p = plain();
    p.top_p = 0.85f;  // needs the third token as well
    Sampler s(p);
    auto h = histogram(s, logits, 4000);
    EXPECT_EQ(h[0], 0);
    EXPECT_GT(h[2], 0);
  }
  {
    SamplingParams p = plain();
    p.top_p = 0.0f;  // always at least one token
    Sampler s(p);
    EXPECT_EQ(histogram(s, logits, 100)[1], 100);
  }
}

TEST(Sampling, MinPDropsTokensBelowAFractionOfTheBest) {
  auto logits = log_probs({0.5, 0.3, 0.15, 0.05});
  {
    SamplingParams p = plain();
    p.min_p = 0.2f;  // threshold 0.1: keeps 0, 1, 2
    Sampler s(p);
    auto h = histogram(s, logits, 4000);
    EXPECT_EQ(h[3], 0);
    EXPECT_GT(h[2], 0);
  }
  {
    SamplingParams p = plain();
    p.min_p = 0.5f;  // threshold 0.25: keeps 0, 1
    Sampler s(p);
    auto h = histogram(s, logits, 4000);
    EXPECT_EQ(h[2] + h[3], 0);
    EXPECT_GT(h[1], 0);
  }
}

TEST(Sampling, TemperatureSharpensAndFlattens) {
  std::vector<float> logits = {1.0f, 0.0f};
  SamplingParams cold = plain(3);
  cold.temp = 0.1f;  // p(0) = 1 / (1 + e^-10)
  Sampler c(cold);
  EXPECT_GE(histogram(c, logits, 2000)[0], 1995);
  SamplingParams hot = plain(3);
  hot.temp = 10.0f;  // p(0) = 1 / (1 + e^-0.1) ~ 0.525
  Sampler h(hot);
  EXPECT_NEAR(histogram(h, logits, 4000)[0] / 4000.0, 0.525, 0.03);
}

TEST(Sampling, RepeatPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams p;
  p.temp = 0.0f;
  p.repeat_penalty = 1.5f;
  p.repeat_last_n = 2;
  Sampler s(p);
  std::vector<float> positive = {2.0f, 1.9f, -1.0f};
  EXPECT_EQ(s.sample(positive), 0);
  s.accept(0);
  EXPECT_EQ(s.sample(positive), 1) << "2.0 / 1.5 < 1.9";

  std::vector<float> negative = {-5.0f, -1.0f, -1.2f};
  EXPECT_EQ(s.sample(negative), 1);
  s.accept(1);
  EXPECT_EQ(s.sample(negative), 2) << "-1.0 * 1.5 < -1.2";

  // The window holds the last 2 tokens: after two more, token 0 is no longer penalized.
  s.accept(2);
  s.accept(2);
  EXPECT_EQ(s.sample(positive), 0);
  s.accept(0);
  s.reset();
  EXPECT_EQ(s.sample(positive), 0) << "reset forgets the window";

  SamplingParams off = p;
  off.repeat_penalty = 1.0f;
  Sampler o(off);
  o.accept(0);
  EXPECT_EQ(o.sample(positive), 0);
}

// Ranks of all tokens by a full sort (logit descending, then id): the reference for the filters.
std::vector<int32_t> full_sort_order(const std::vector<float>& logits) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
  return order;
}

// The tokens top-p keeps, by the definition: the shortest prefix of the full order reaching p.
std::vector<bool> top_p_reference(const std::vector<float>& logits, double p) {
  auto order = full_sort_order(logits);
  double best = logits[order[0]], total = 0, mass = 0;
  for (float l : logits) total += std::exp(l - best);
  std::vector<bool> allowed(logits.size(), false);
  for (int32_t id : order) {
    allowed[id] = true;
    mass += std::exp(logits[id] - best);
    if (mass >= p * total) break;
  }
  return allowed;
}

TEST(Sampling, LargeVocabularyFiltersAgreeWithAFullSort) {
  const size_t n = 102400;
  for (int variant = 0; variant < 3; ++variant) {
    auto logits = random_logits(n, 11);
    const bool with_ties = variant == 1;
    if (with_ties)  // many equal logits: the top-p boundary falls inside a run of ties
      for (float& l : logits) l = std::round(l * 2.0f) / 2.0f;
    if (variant == 2)  // masked tokens
      for (size_t i = 0; i < n; i += 3) logits[i] = -INFINITY;
    auto allowed = top_p_reference(logits, 0.95);
    SamplingParams p = plain(2024);
    p.top_p = 0.95f;  // top-k off: the whole vocabulary goes through top-p
    Sampler s(p);
    for (int i = 0; i < 50; ++i) {
      int32_t t = s.sample(logits);
      ASSERT_TRUE(t >= 0 && static_cast<size_t>(t) < n);
      EXPECT_TRUE(allowed[t]) << "token " << t << " is outside the top-p set (variant " << variant << ")";
    }

    // A large top-k (the nth_element path): only the 2000 best tokens come out.
    auto order = full_sort_order(logits);
    std::vector<bool> in_top_k(n, false);
    for (size_t r = 0; r < 2000; ++r) in_top_k[order[r]] = true;
    SamplingParams k = plain(3);
    k.top_k = 2000;
    k.temp = 5.0f;  // flat enough to reach deep into the 2000
    Sampler ks(k);
    for (int i = 0; i < 200; ++i) EXPECT_TRUE(in_top_k[ks.sample(logits)]);

    // min-p alone over the whole vocabulary.
    SamplingParams m = plain(4);
    m.min_p = 0.01f;
    Sampler ms(m);
    const float threshold = logits[order[0]] + std::log(0.01f);
    for (int i = 0; i < 200; ++i) EXPECT_GE(logits[ms.sample(logits)], threshold - 1e-5f);
  }

  // The default chain on a 100k vocabulary with a clear winner.
  auto logits = random_logits(n, 12);
  logits[777] = 40.0f;
  SamplingParams d;
  d.seed = 5;
  Sampler ds(d);
  for (int i = 0; i < 20; ++i) {
    int32_t t = ds.sample(logits);
    ds.accept(t);
    EXPECT_EQ(t, 777);
  }
}

TEST(Sampling, InvalidParametersAreRejected) {
  auto bad = [](auto mutate) {
    SamplingParams p;
    mutate(p);
    EXPECT_THROW(Sampler{p}, ggl::Error);
  };
  bad([](SamplingParams& p) { p.temp = -0.1f; });
  bad([](SamplingParams& p) { p.top_k = -1; });
  bad([](SamplingParams& p) { p.top_p = 1.5f; });
  bad([](SamplingParams& p) { p.min_p = -0.01f; });
  bad([](SamplingParams& p) { p.repeat_penalty = 0.0f; });
  bad([](SamplingParams& p) { p.repeat_last_n = -2; });
  bad([](SamplingParams& p) { p.seed = -2; });
  Sampler ok(plain());
  EXPECT_THROW(ok.sample(std::vector<float>{}), ggl::Error);
}

TEST(Sampling, CliFlagsFillTheParams) {
  CLI::App app;
  SamplingParams p;
  latte::add_sampling_flags(app, p);
  std::vector<std::string> args = {"--temp",          "0.5", "--top-k", "10", "--top-p",          "0.9",
                                   "--min-p",         "0.1", "-s",      "42", "--repeat-penalty", "1.1",
                                   "--repeat-last-n", "32"};
  std::reverse(args.begin(), args.end());  // CLI11 parses a reversed vector
  app.parse(args);
  EXPECT_FLOAT_EQ(p.temp, 0.5f);
  EXPECT_EQ(p.top_k, 10);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_FLOAT_EQ(p.min_p, 0.1f);
  EXPECT_EQ(p.seed, 42);
  EXPECT_FLOAT_EQ(p.repeat_penalty, 1.1f);
  EXPECT_EQ(p.repeat_last_n, 32);

  CLI::App defaults;
  SamplingParams q;
  latte::add_sampling_flags(defaults, q);
  std::vector<std::string> none;
  defaults.parse(none);
  EXPECT_FLOAT_EQ(q.temp, 0.8f);
  EXPECT_EQ(q.top_k, 40);
  EXPECT_EQ(q.seed, -1);
}

}  // namespace test_sampling
