#include "src/synth/random_weights.h"

#include <cmath>

namespace latte::synth {
namespace {

// SplitMix64's output function: a bijective 64-bit mixer whose outputs for consecutive inputs
// pass the usual statistical test batteries.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;  // SplitMix64's increment

uint64_t hash_name(const std::string& s) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// 24 random bits as a float in [-1, 1).
inline float unit(uint32_t bits24) { return static_cast<float>(bits24) * (2.0f / 16777216.0f) - 1.0f; }

}  // namespace

RandomWeights::RandomWeights(uint64_t seed, const SynthTensor& tensor)
    : key_(mix64(seed ^ mix64(hash_name(tensor.name)))), row_length_(tensor.ne[0]) {
  // A uniform distribution on [-w, w] has standard deviation w / sqrt(3).
  const float sqrt3 = std::sqrt(3.0f);
  switch (tensor.init) {
    case WeightInit::kMatrix:
      offset_ = 0.0f;
      half_width_ = sqrt3 / std::sqrt(static_cast<float>(tensor.fan_in));
      break;
    case WeightInit::kNorm:
      offset_ = 1.0f;
      half_width_ = 0.05f * sqrt3;
      break;
    case WeightInit::kBias:
      offset_ = 0.0f;
      half_width_ = 0.02f * sqrt3;
      break;
  }
}

void RandomWeights::fill_row(int64_t row, float* dst) const {
  const uint64_t base = mix64(key_ + static_cast<uint64_t>(row) * kGolden);
  const int64_t n = row_length_;
  int64_t j = 0;
  // Two values per 64-bit draw: the top 24 bits and bits 8..31.
  for (uint64_t i = 0; j + 1 < n; ++i, j += 2) {
    const uint64_t z = mix64(base + i * kGolden);
    dst[j] = offset_ + half_width_ * unit(static_cast<uint32_t>(z >> 40));
    dst[j + 1] = offset_ + half_width_ * unit(static_cast<uint32_t>(z >> 8) & 0xffffffu);
  }
  if (j < n) dst[j] = offset_ + half_width_ * unit(static_cast<uint32_t>(mix64(base + ~0ULL) >> 40));
}

void RandomWeights::fill(int64_t first, int64_t count, float* dst) const {
#pragma omp parallel for schedule(static) if (count * row_length_ >= (int64_t{1} << 16))
  for (int64_t r = 0; r < count; ++r) fill_row(first + r, dst + r * row_length_);
}

}  // namespace latte::synth
