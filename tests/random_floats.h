// Normally distributed test values, reproducible from a seed.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace latte::testing {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace latte::testing
