// Distances between a candidate's logits and a reference, as defined in
// ../shared/fixtures/README.md, plus readers for the fixture files.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace latte::testing {

struct LogitMetrics {
  double nrmse = 0;    // sqrt(mean((cand - ref)^2)) / std(ref)
  double mean_kl = 0;  // KL(softmax(ref) || softmax(cand)) per position: mean ...
  double max_kl = 0;   // ... and max
  double top1 = 0;     // fraction of positions whose argmax agrees
};

inline std::vector<float> read_f32_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / sizeof(float));
  std::copy_n(bytes.data(), v.size() * sizeof(float), reinterpret_cast<char*>(v.data()));
  return v;
}

inline std::vector<int32_t> read_token_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::vector<int32_t> ids;
  for (long long id; in >> id;) ids.push_back(static_cast<int32_t>(id));
  return ids;
}

inline LogitMetrics compare_logits(const std::vector<float>& ref, const std::vector<float>& cand, size_t n_vocab) {
  if (ref.size() != cand.size() || n_vocab == 0 || ref.size() % n_vocab != 0)
    throw std::runtime_error("logit arrays differ in size");
  LogitMetrics m;
  double mean = 0;
  for (float r : ref) mean += r;
  mean /= static_cast<double>(ref.size());
  double var = 0, sq = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    var += (ref[i] - mean) * (ref[i] - mean);
    sq += (static_cast<double>(cand[i]) - ref[i]) * (static_cast<double>(cand[i]) - ref[i]);
  }
  m.nrmse = std::sqrt(sq / static_cast<double>(ref.size())) / std::sqrt(var / static_cast<double>(ref.size()));

  const size_t n_pos = ref.size() / n_vocab;
  size_t agree = 0;
  for (size_t p = 0; p < n_pos; ++p) {
    const float* r = ref.data() + p * n_vocab;
    const float* c = cand.data() + p * n_vocab;
    auto log_norm = [n_vocab](const float* x) {
      const double mx = *std::max_element(x, x + n_vocab);
      double z = 0;
      for (size_t i = 0; i < n_vocab; ++i) z += std::exp(x[i] - mx);
      return mx + std::log(z);
    };
    const double lr = log_norm(r), lc = log_norm(c);
    double kl = 0;
    for (size_t i = 0; i < n_vocab; ++i) {
      const double log_p = r[i] - lr, log_q = c[i] - lc;
      kl += std::exp(log_p) * (log_p - log_q);
    }
    kl = std::max(kl, 0.0);
    m.mean_kl += kl;
    m.max_kl = std::max(m.max_kl, kl);
    if (std::max_element(r, r + n_vocab) - r == std::max_element(c, c + n_vocab) - c) ++agree;
  }
  m.mean_kl /= static_cast<double>(n_pos);
  m.top1 = static_cast<double>(agree) / static_cast<double>(n_pos);
  return m;
}

}  // namespace latte::testing
