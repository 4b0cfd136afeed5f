// Rotary position embedding with optional YaRN frequency blending (arXiv:2309.00071).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ggml-like/cpu/cpu_kernels.h"
#include "ggml-like/graph/graph.h"

#include "ggml-like/cpu/simd/simd_kernels.h"

namespace ggl::GGL_ISA {
namespace {

// The pair index at which a frequency completes `rotations` turns over n_ctx_orig positions.
float yarn_corr_dim(int n_rot, int n_ctx_orig, float rotations, float base) {
  return static_cast<float>(n_rot) * std::log(static_cast<float>(n_ctx_orig) / (rotations * 2.0f * static_cast<float>(M_PI))) /
         (2.0f * std::log(base));
}

// cos/sin of every rotated pair for one position.
void rope_angles(const RopeParams& p, const float* freq_factors, int32_t pos, float* cs) {
  const int pairs = p.n_rot / 2;
  float low = 0.0f, high = 0.0f;
  if (p.ext_factor != 0.0f) {
    low = std::max(0.0f, std::floor(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_fast, p.freq_base)));
    high = std::min(static_cast<float>(p.n_rot - 1), std::ceil(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_slow, p.freq_base)));
  }
  for (int i = 0; i < pairs; ++i) {
    // Original angle: pos * base^(-2i / n_rot), optionally divided by a per-pair factor.
    double extrap = static_cast<double>(pos) * std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_rot);
    if (freq_factors) extrap /= freq_factors[i];
    const double interp = extrap * p.freq_scale;
    double theta = interp;
    if (p.ext_factor != 0.0f) {
      // ramp = 1 for high frequencies (keep the original angle), 0 for low ones (interpolate).
      const float y = (static_cast<float>(i) - low) / std::max(0.001f, high - low);
      const double mix = (1.0f - std::clamp(y, 0.0f, 1.0f)) * p.ext_factor;
      theta = interp * (1.0 - mix) + extrap * mix;
    }
    cs[2 * i] = static_cast<float>(std::cos(theta)) * p.attn_factor;
    cs[2 * i + 1] = static_cast<float>(std::sin(theta)) * p.attn_factor;
  }
}

}  // namespace

size_t cpu_rope_work(const Tensor& dst, int n_threads) {
  return scratch_size(static_cast<size_t>(dst.params[0].i) * sizeof(float)) * n_threads;
}

void cpu_rope(const Tensor& dst, const CpuThread& th) {
  const Tensor& a = *dst.src[0];
  const Tensor& pos = *dst.src[1];
  const float* ff = dst.src[2] ? reinterpret_cast<const float*>(dst.src[2]->data) : nullptr;
  const RopeParams p = rope_params(dst);
  const int64_t D = a.ne[0], H = a.ne[1], T = a.ne[2], B = a.ne[3];
  const int half = p.n_rot / 2;
  float* cs = th.scratch<float>(scratch_size(p.n_rot * sizeof(float)));
  const auto* positions = reinterpret_cast<const int32_t*>(pos.data);

  auto [r0, r1] = split_range(H * T * B, th.ith, th.nth);
  int64_t cached = -1;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t h = r % H, t = (r / H) % T, b = r / (H * T);
    if (t != cached) {
      rope_angles(p, ff, positions[t], cs);
      cached = t;
    }
    const float* x = a.f32_row(h, t, b);
    float* y = dst.f32_row(h, t, b);
    for (int i = 0; i < half; ++i) {
      const int i0 = p.neox ? i : 2 * i, i1 = p.neox ? i + half : 2 * i + 1;
      const float c = cs[2 * i], s = cs[2 * i + 1];
      const float x0 = x[i0], x1 = x[i1];
      y[i0] = x0 * c - x1 * s;
      y[i1] = x0 * s + x1 * c;
    }
    if (D > p.n_rot) std::memcpy(y + p.n_rot, x + p.n_rot, (D - p.n_rot) * sizeof(float));
  }
}

}  // namespace ggl::GGL_ISA
