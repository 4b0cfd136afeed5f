#include "src/eval/kl_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace latte::eval {
namespace {

struct Estimate {
  double value;
  double error;
};

// Mean of values whose sum and sum of squares are given, and the standard error of that mean
// (0 for 10 values or fewer, as the reference does).
Estimate mean_and_error(double sum, double sum2, int64_t count) {
  if (count < 1) return {0, 0};
  const double n = static_cast<double>(count);
  const double mean = sum / n;
  const double var = sum2 / n - mean * mean;
  return {mean, var > 0 && count > 10 ? std::sqrt(var / (n - 1)) : 0.0};
}

// Covariance of the two means (0 below 10 values).
double covariance(double sum_a, double sum_b, double sum_ab, int64_t count) {
  if (count < 10) return 0.0;
  const double n = static_cast<double>(count);
  return (sum_ab / n - (sum_a / n) * (sum_b / n)) / (n - 1);
}

// The value at fraction f of sorted values, interpolated between neighbours.
float percentile(const std::vector<float>& sorted, float f) {
  if (f <= 0) return sorted.front();
  if (f >= 1) return sorted.back();
  float p = f * static_cast<float>(sorted.size() - 1);
  const size_t i = static_cast<size_t>(p);
  p -= static_cast<float>(i);
  return (1 - p) * sorted[i] + p * sorted[std::min(i + 1, sorted.size() - 1)];
}

float median(const std::vector<float>& sorted) {
  const size_t n = sorted.size();
  return n % 2 == 0 ? 0.5f * (sorted[n / 2] + sorted[n / 2 - 1]) : sorted[n / 2];
}

struct PplComparison {
  Estimate log_ppl, log_ppl_base;
  double log_cov;
  Estimate log_ratio;
};

PplComparison compare_ppl(const KlSums& s) {
  PplComparison c;
  c.log_ppl = mean_and_error(s.nll, s.nll2, s.count);
  c.log_ppl_base = mean_and_error(s.nll_base, s.nll_base2, s.count);
  c.log_cov = covariance(s.nll, s.nll_base, s.nll_nll_base, s.count);
  c.log_ratio = {
      c.log_ppl.value - c.log_ppl_base.value,
      std::sqrt(c.log_ppl.error * c.log_ppl.error + c.log_ppl_base.error * c.log_ppl_base.error - 2.0 * c.log_cov)};
  return c;
}

Estimate rms_p_diff(const KlSums& s) {
  const Estimate mse = mean_and_error(s.p_diff2, s.p_diff4, s.count);
  const double rms = std::sqrt(mse.value);
  return {rms, rms > 0 ? 0.5 / rms * mse.error : 0.0};  // identical models: no change at all
}

Estimate same_top(const KlSums& s) {
  const double p = static_cast<double>(s.same_top) / static_cast<double>(s.count);
  return {p, std::sqrt(p * (1 - p) / static_cast<double>(s.count - 1))};
}

}  // namespace

std::string kl_table_header() {
  return "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS      "
         "      Same top p\n";
}

std::string kl_table_row(int64_t chunk, const KlSums& s) {
  const PplComparison c = compare_ppl(s);
  const double ppl = std::exp(c.log_ppl.value);
  const Estimate kld = mean_and_error(s.kld, s.kld2, s.count);
  const Estimate rms = rms_p_diff(s), top = same_top(s);
  return fmt::format(
      "{:4d}    {:9.4f} ± {:9.4f}    {:10.5f} ± {:10.5f}    {:10.5f} ± {:10.5f}    {:6.3f} ± {:6.3f} %"
      "    {:6.3f} ± {:6.3f} %\n",
      chunk, ppl, ppl * c.log_ppl.error, c.log_ratio.value, c.log_ratio.error, kld.value, kld.error, 100.0 * rms.value,
      100.0 * rms.error, 100.0 * top.value, 100.0 * top.error);
}

std::string kl_summary(KlResult& r) {
  const KlSums& s = r.sums;
  if (s.count < 100)
    return fmt::format("{} scored tokens: too few for the closing statistics (at least 100)\n", s.count);
  std::sort(r.kld.begin(), r.kld.end());
  std::sort(r.p_diff.begin(), r.p_diff.end());
  const PplComparison c = compare_ppl(s);
  const double ppl = std::exp(c.log_ppl.value), ppl_err = ppl * c.log_ppl.error;
  const double base = std::exp(c.log_ppl_base.value), base_err = base * c.log_ppl_base.error;
  const double ratio = std::exp(c.log_ratio.value);
  const double ppl_cov = ppl * base * c.log_cov;
  std::string out = "====== Perplexity statistics ======\n";
  out += fmt::format("Mean PPL(Q)                   : {:10.6f} ± {:10.6f}\n", ppl, ppl_err);
  out += fmt::format("Mean PPL(base)                : {:10.6f} ± {:10.6f}\n", base, base_err);
  out += fmt::format("Cor(ln(PPL(Q)), ln(PPL(base))): {:6.2f}%\n",
                     100.0 * c.log_cov / (c.log_ppl.error * c.log_ppl_base.error));
  out += fmt::format("Mean ln(PPL(Q)/PPL(base))     : {:10.6f} ± {:10.6f}\n", c.log_ratio.value, c.log_ratio.error);
  out += fmt::format("Mean PPL(Q)/PPL(base)         : {:10.6f} ± {:10.6f}\n", ratio, ratio * c.log_ratio.error);
  out += fmt::format("Mean PPL(Q)-PPL(base)         : {:10.6f} ± {:10.6f}\n\n", ppl - base,
                     std::sqrt(ppl_err * ppl_err + base_err * base_err - 2.0 * ppl_cov));

  const Estimate kld = mean_and_error(s.kld, s.kld2, s.count);
  out += "====== KL divergence statistics ======\n";
  out += fmt::format("Mean    KLD: {:10.6f} ± {:10.6f}\n", kld.value, kld.error);
  out += fmt::format("Maximum KLD: {:10.6f}\n", r.kld.back());
  out += fmt::format("99.9%   KLD: {:10.6f}\n", percentile(r.kld, 0.999f));
  out += fmt::format("99.0%   KLD: {:10.6f}\n", percentile(r.kld, 0.990f));
  out += fmt::format("Median  KLD: {:10.6f}\n", median(r.kld));
  out += fmt::format("10.0%   KLD: {:10.6f}\n", percentile(r.kld, 0.100f));
  out += fmt::format(" 5.0%   KLD: {:10.6f}\n", percentile(r.kld, 0.050f));
  out += fmt::format(" 1.0%   KLD: {:10.6f}\n", percentile(r.kld, 0.010f));
  out += fmt::format("Minimum KLD: {:10.6f}\n\n", r.kld.front());

  const Estimate dp = mean_and_error(s.p_diff, s.p_diff2, s.count);
  out += "====== Token probability statistics ======\n";
  out += fmt::format("Mean    Δp: {:6.3f} ± {:5.3f} %\n", 100.0 * dp.value, 100.0 * dp.error);
  out += fmt::format("Maximum Δp: {:6.3f}%\n", 100.0 * r.p_diff.back());
  for (const auto& [label, f] : std::vector<std::pair<const char*, float>>{
           {"99.9%", 0.999f}, {"99.0%", 0.990f}, {"95.0%", 0.950f}, {"90.0%", 0.900f}, {"75.0%", 0.750f}}) {
    out += fmt::format("{}   Δp: {:6.3f}%\n", label, 100.0 * percentile(r.p_diff, f));
  }
  out += fmt::format("Median  Δp: {:6.3f}%\n", 100.0 * median(r.p_diff));
  for (const auto& [label, f] : std::vector<std::pair<const char*, float>>{
           {"25.0%", 0.250f}, {"10.0%", 0.100f}, {" 5.0%", 0.050f}, {" 1.0%", 0.010f}, {" 0.1%", 0.001f}}) {
    out += fmt::format("{}   Δp: {:6.3f}%\n", label, 100.0 * percentile(r.p_diff, f));
  }
  out += fmt::format("Minimum Δp: {:6.3f}%\n", 100.0 * r.p_diff.front());
  const Estimate rms = rms_p_diff(s), top = same_top(s);
  out += fmt::format("RMS Δp    : {:6.3f} ± {:5.3f} %\n", 100.0 * rms.value, 100.0 * rms.error);
  out += fmt::format("Same top p: {:6.3f} ± {:5.3f} %\n", 100.0 * top.value, 100.0 * top.error);
  return out;
}

}  // namespace latte::eval
