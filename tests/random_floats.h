// Normally distributed test values, reproducible from a seed.
#pragma once
#include <algorithm>
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

// `cols` activation columns of n values drawn from `normal`, shaped as real hidden states are: an
// outlier of 300 per column (at (c * outlier_step) % n), a block of zeros (values 32..63) and a
// tiny block (64..95, scaled by 1e-6) where n allows.
inline std::vector<float> hidden_state_like(std::mt19937& rng, std::normal_distribution<float>& normal, int64_t cols,
                                            int64_t n, int64_t outlier_step) {
  std::vector<float> x(cols * n);
  for (float& v : x) v = normal(rng);
  for (int64_t c = 0; c < cols; ++c) {
    x[c * n + (c * outlier_step) % n] = 300.0f;
    if (n >= 96) {
      std::fill(x.begin() + c * n + 32, x.begin() + c * n + 64, 0.0f);
      for (int64_t i = 64; i < 96; ++i) x[c * n + i] *= 1e-6f;
    }
  }
  return x;
}

}  // namespace latte::testing
