// Rotary position embedding's angles with optional YaRN frequency blending (arXiv:2309.00071),
// shared by the CPU op (cpu/simd/op_rope.cpp) and the CUDA kernel (cuda/op_rope.cu): each rotated
// pair blends the interpolated angle (position * freq * freq_scale) and the original one by a
// linear ramp over the pair index; attn_factor scales cos/sin. GGL_HD: see core/host_device.h.
#pragma once
#include <cmath>
#include <cstdint>

#include "ggml-like/core/host_device.h"

namespace ggl {

// What the angles need of graph.h's RopeParams (rope_args(node) there), with the YaRN ramp's ends
// worked out once (rope_ramp).
struct RopeArgs {
  int n_rot;
  int neox;  // pairs (i, i + n_rot / 2) instead of (2i, 2i + 1)
  float freq_base, freq_scale, ext_factor, attn_factor;
  float ramp_low, ramp_high;  // pair indices where the YaRN ramp starts and ends
};

// The pair index at which a frequency completes `rotations` turns over n_ctx_orig positions.
GGL_HD float yarn_corr_dim(int n_rot, int n_ctx_orig, float rotations, float base) {
  return static_cast<float>(n_rot) *
         logf(static_cast<float>(n_ctx_orig) / (rotations * 2.0f * 3.14159265358979323846f)) / (2.0f * logf(base));
}

// Fills ramp_low / ramp_high (zero without YaRN). Called once per op, on the host.
GGL_HD void rope_ramp(RopeArgs& r, int n_ctx_orig, float beta_fast, float beta_slow) {
  r.ramp_low = r.ramp_high = 0.0f;
  if (r.ext_factor == 0.0f) return;
  r.ramp_low = fmaxf(0.0f, floorf(yarn_corr_dim(r.n_rot, n_ctx_orig, beta_fast, r.freq_base)));
  r.ramp_high =
      fminf(static_cast<float>(r.n_rot - 1), ceilf(yarn_corr_dim(r.n_rot, n_ctx_orig, beta_slow, r.freq_base)));
}

// cos and sin (times attn_factor) of pair i at position pos; freq_factor divides the original
// frequency (1 when the model has no per-pair factors). In double: in float, position times
// frequency loses the angle at long contexts.
GGL_HD void rope_cos_sin(const RopeArgs& r, int i, int32_t pos, float freq_factor, float* c, float* s) {
  double extrap = static_cast<double>(pos) * pow(static_cast<double>(r.freq_base), -2.0 * i / r.n_rot);
  extrap /= freq_factor;
  const double interp = extrap * r.freq_scale;
  double theta = interp;
  if (r.ext_factor != 0.0f) {
    // ramp = 1 for high frequencies (keep the original angle), 0 for low ones (interpolate).
    const float y = (static_cast<float>(i) - r.ramp_low) / fmaxf(0.001f, r.ramp_high - r.ramp_low);
    const double mix = (1.0f - fminf(fmaxf(y, 0.0f), 1.0f)) * r.ext_factor;
    theta = interp * (1.0 - mix) + extrap * mix;
  }
  *c = static_cast<float>(cos(theta)) * r.attn_factor;
  *s = static_cast<float>(sin(theta)) * r.attn_factor;
}

// The two elements pair i rotates.
GGL_HD void rope_pair(const RopeArgs& r, int i, int* i0, int* i1) {
  *i0 = r.neox ? i : 2 * i;
  *i1 = r.neox ? i + r.n_rot / 2 : 2 * i + 1;
}

}  // namespace ggl
