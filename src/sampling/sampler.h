// Picks the next token from logits through a chain like llama.cpp's default one:
//   repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw from the distribution.
// With temp = 0 the chain is repetition penalty -> argmax.
//
//   latte::Sampler sampler(params);
//   for (...) { int32_t t = sampler.sample(logits); sampler.accept(t); ... }
//
// Cost is linear in the vocabulary, never a full sort: top-k is a single scan keeping a k-element
// heap (nth_element for large k), top-p buckets the logits and sorts only the boundary bucket,
// min-p is a partition.
// Reproducible: the same seed, logits and accepted tokens give the same tokens. The random draw
// walks the surviving tokens in id order with std::mt19937_64 and a hand-written uniform
// variate, so it does not depend on how the standard library orders or distributes anything.
#pragma once
#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

#include "src/sampling/sampling_params.h"

namespace latte {

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);  // validates the parameters

  // The next token for these logits (one per vocabulary entry). Does not record it: call accept().
  int32_t sample(std::span<const float> logits);
  // Records a token of the context (prompt tokens too, if they should count for the penalty).
  void accept(int32_t token);
  // Forgets the recorded tokens (the random stream continues).
  void reset();

  // The seed in use: params.seed, or the one drawn when it was -1 (print it to reproduce a run).
  uint64_t seed() const { return seed_; }
  const SamplingParams& params() const { return params_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;
    float weight;  // exp(logit - best logit), filled where needed
  };
  void apply_repeat_penalty();
  size_t keep_top_k(size_t n);
  size_t keep_top_p(size_t n);
  size_t keep_min_p(size_t n);
  int32_t draw(size_t n);
  double uniform01();

  SamplingParams params_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::vector<Candidate> candidates_;  // reused between calls
  std::vector<double> weights_;        // weights for the draw, reused
  std::vector<double> bucket_mass_;    // top-p histogram, reused
  std::vector<Candidate> scratch_;     // top-p compaction buffer, reused
  std::deque<int32_t> recent_;         // the penalty window, oldest first
  std::unordered_map<int32_t, int> recent_counts_;
};

}  // namespace latte
