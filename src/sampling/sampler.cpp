#include "src/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ggml-like/core/error.h"

namespace latte {

namespace {

// Better candidates first: higher logit, then lower id. A total order, so which tokens survive a
// filter never depends on how the standard library breaks ties.
struct Better {
  template <typename C>
  bool operator()(const C& a, const C& b) const {
    return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
  }
};

// The best candidate of a range (Better orders best first, so it is the "minimum").
template <typename It>
It best_of(It first, It last) {
  return std::min_element(first, last, Better());
}

uint64_t resolve_seed(int64_t seed) {
  if (seed >= 0) return static_cast<uint64_t>(seed);
  // 32 bits, as llama.cpp's seeds: short enough to retype, and always a valid -s value (a 64-bit
  // draw could exceed the int64 that --seed takes).
  std::random_device device;
  return static_cast<uint32_t>(device());
}

}  // namespace

void SamplingParams::validate() const {
  if (!(temp >= 0.0f) || !std::isfinite(temp)) ggl::fail("--temp must be >= 0 (0 = greedy), got {}", temp);
  if (top_k < 0) ggl::fail("--top-k must be >= 0 (0 = off), got {}", top_k);
  if (!(top_p >= 0.0f && top_p <= 1.0f)) ggl::fail("--top-p must be in [0, 1] (1 = off), got {}", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) ggl::fail("--min-p must be in [0, 1] (0 = off), got {}", min_p);
  if (!(repeat_penalty > 0.0f) || !std::isfinite(repeat_penalty))
    ggl::fail("--repeat-penalty must be > 0 (1 = off), got {}", repeat_penalty);
  if (repeat_last_n < -1) ggl::fail("--repeat-last-n must be >= -1 (0 = off, -1 = all), got {}", repeat_last_n);
  if (seed < -1) ggl::fail("--seed must be >= 0, or -1 for a random seed, got {}", seed);
}

Sampler::Sampler(const SamplingParams& params) : params_(params), seed_(0) {
  params_.validate();
  seed_ = resolve_seed(params_.seed);
  rng_.seed(seed_);
}

void Sampler::accept(int32_t token) {
  if (params_.repeat_last_n == 0) return;
  recent_.push_back(token);
  ++recent_counts_[token];
  if (params_.repeat_last_n > 0 && recent_.size() > static_cast<size_t>(params_.repeat_last_n)) {
    auto it = recent_counts_.find(recent_.front());
    if (--it->second == 0) recent_counts_.erase(it);
    recent_.pop_front();
  }
}

void Sampler::reset() {
  recent_.clear();
  recent_counts_.clear();
}

double Sampler::uniform01() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

void Sampler::apply_repeat_penalty() {
  if (params_.repeat_penalty == 1.0f) return;
  for (const auto& [token, count] : recent_counts_) {
    if (token < 0 || static_cast<size_t>(token) >= candidates_.size()) continue;
    float& logit = candidates_[token].logit;  // candidates_ is still indexed by id here
    logit = logit > 0.0f ? logit / params_.repeat_penalty : logit * params_.repeat_penalty;
  }
}

// Moves the k best of [0, n) to the front. For small k one scan with a k-element heap whose top
// is the worst kept candidate: almost every token is rejected by a single comparison.
size_t Sampler::keep_top_k(size_t n) {
  const size_t k = static_cast<size_t>(params_.top_k);
  if (k == 0 || k >= n) return n;
  auto first = candidates_.begin();
  if (k > 1024) {
    std::nth_element(first, first + k, first + n, Better());
    return k;
  }
  std::make_heap(first, first + k, Better());
  for (size_t i = k; i < n; ++i) {
    if (!Better()(candidates_[i], candidates_[0])) continue;
    std::pop_heap(first, first + k, Better());
    candidates_[k - 1] = candidates_[i];
    std::push_heap(first, first + k, Better());
  }
  return k;
}

// Moves to the front the smallest set of best candidates whose probability reaches top_p and
// returns its size. Small sets are sorted; large ones are bucketed by logit first, so that only
// the bucket holding the boundary needs sorting (a few branch-free passes over the vocabulary).
size_t Sampler::keep_top_p(size_t n) {
  auto first = candidates_.begin();
  // The range of the finite logits (-inf ones, e.g. masked tokens, have no probability).
  float best = -std::numeric_limits<float>::infinity(), worst = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) {
    float l = candidates_[i].logit;
    best = std::max(best, l);
    if (std::isfinite(l)) worst = std::min(worst, l);
  }
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += candidates_[i].weight = std::exp(candidates_[i].logit - best);
  const double target = params_.top_p * total;
  if (!(target > 0.0)) {  // top_p = 0, or no finite logits: the best candidate alone
    std::iter_swap(first, best_of(first, first + n));
    return 1;
  }

  // Candidates whose order still has to be settled: [begin, end), with `mass` already kept before.
  size_t begin = 0, end = n;
  double mass = 0.0;
  constexpr int kBuckets = 4096;
  const float range = best - worst;
  if (n > 2 * kBuckets && std::isfinite(range) && range > 0.0f) {
    // A logit's bucket grows with the logit (monotonic float arithmetic), so every candidate of a
    // higher bucket is at least as good as every candidate of a lower one.
    const float scale = (kBuckets - 1) / range;
    auto bucket = [&](const Candidate& c) {
      float b = (c.logit - worst) * scale;  // -inf logits (weight 0) go to bucket 0
      return b > 0.0f ? std::min(static_cast<int>(b), kBuckets - 1) : 0;
    };
    bucket_mass_.assign(kBuckets, 0.0);
    for (size_t i = 0; i < n; ++i) bucket_mass_[bucket(candidates_[i])] += candidates_[i].weight;
    int boundary = kBuckets - 1;
    while (boundary > 0 && mass + bucket_mass_[boundary] < target) mass += bucket_mass_[boundary--];
    // Branch-free compaction: buckets above the boundary first, then the boundary bucket.
    scratch_.resize(n);
    size_t above = 0;
    for (size_t i = 0; i < n; ++i) {
      scratch_[above] = candidates_[i];
      above += bucket(candidates_[i]) > boundary;
    }
    size_t at = above;
    for (size_t i = 0; i < n; ++i) {
      scratch_[at] = candidates_[i];
      at += bucket(candidates_[i]) == boundary;
    }
    std::copy(scratch_.begin(), scratch_.begin() + at, first);
    begin = above;
    end = at;
  }
  std::sort(first + begin, first + end, Better());
  for (size_t i = begin; i < end; ++i) {
    mass += candidates_[i].weight;
    if (mass >= target) return i + 1;
  }
  return std::max<size_t>(end, 1);  // rounding left the target just out of reach: keep all
}

// Keeps the candidates with p >= min_p * p_max, i.e. logit >= best logit + log(min_p).
size_t Sampler::keep_min_p(size_t n) {
  auto first = candidates_.begin();
  const double threshold = best_of(first, first + n)->logit + std::log(static_cast<double>(params_.min_p));
  size_t kept = std::partition(first, first + n, [&](const Candidate& c) { return c.logit >= threshold; }) - first;
  return std::max<size_t>(kept, 1);
}

// Draws one of the first n candidates with probability softmax(logit / temp). The walk goes in
// id order, whatever order the filters left the candidates in.
int32_t Sampler::draw(size_t n) {
  auto first = candidates_.begin();
  const float best = best_of(first, first + n)->logit;
  if (!std::isfinite(best)) return best_of(first, first + n)->id;
  const double inv_temp = 1.0 / params_.temp;
  const float inv_temp_f = static_cast<float>(inv_temp);
  auto weight = [&](const Candidate& c) { return static_cast<double>(std::exp((c.logit - best) * inv_temp_f)); };

  if (n * 16 < candidates_.size()) {  // few survivors: sort them by id
    std::sort(first, first + n, [](const Candidate& x, const Candidate& y) { return x.id < y.id; });
    weights_.resize(n);
    double total = 0.0;
    for (size_t i = 0; i < n; ++i) total += weights_[i] = weight(candidates_[i]);
    const double target = uniform01() * total;
    double acc = 0.0;
    for (size_t i = 0; i < n; ++i)
      if (target < (acc += weights_[i])) return candidates_[i].id;
    return candidates_[n - 1].id;  // rounding at the very top of the range
  }
  // Many survivors: scatter their weights into id order.
  weights_.assign(candidates_.size(), 0.0);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += weights_[candidates_[i].id] = weight(candidates_[i]);
  const double target = uniform01() * total;
  double acc = 0.0;
  int32_t last = -1;
  for (size_t id = 0; id < weights_.size(); ++id) {
    if (weights_[id] == 0.0) continue;
    last = static_cast<int32_t>(id);
    if (target < (acc += weights_[id])) return last;
  }
  return last >= 0 ? last : candidates_[0].id;
}

int32_t Sampler::sample(std::span<const float> logits) {
  const size_t n = logits.size();
  if (n == 0) ggl::fail("sampler: no logits to sample from");
  candidates_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    float l = logits[i];
    candidates_[i] = {static_cast<int32_t>(i), std::isnan(l) ? -std::numeric_limits<float>::infinity() : l, 0.0f};
  }
  apply_repeat_penalty();

  if (params_.temp <= 0.0f) return best_of(candidates_.begin(), candidates_.end())->id;
  size_t kept = keep_top_k(n);
  if (params_.top_p < 1.0f) kept = keep_top_p(kept);
  if (params_.min_p > 0.0f) kept = keep_min_p(kept);
  return draw(kept);
}

}  // namespace latte
