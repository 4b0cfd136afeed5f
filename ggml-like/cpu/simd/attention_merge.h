// Merging the online-softmax states of slices of the keys (the attention kernels' split-keys mode,
// where one query item has fewer items than threads: each thread attends to a slice of the keys).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace ggl::GGL_ISA {

// The partial states of `parts` key slices for n queries, slice w at partials + w * stride: the
// running maxima m[n], the sums of exp(score - m) l[n], then the accumulators acc[n][Dv]. Writes
// query g's normalised output to out (Dv floats). An empty slice has l = 0 and is skipped.
inline void merge_partial_states(const float* partials, int64_t stride, int parts, int64_t n, int64_t Dv, int64_t g,
                                 float* out) {
  float m = -INFINITY;
  for (int w = 0; w < parts; ++w) m = std::fmax(m, partials[w * stride + g]);
  std::fill(out, out + Dv, 0.0f);
  float l = 0.0f;
  for (int w = 0; w < parts; ++w) {
    const float* part = partials + w * stride;
    if (part[n + g] == 0.0f) continue;
    const float c = std::exp(part[g] - m);
    l += part[n + g] * c;
    const float* acc = part + 2 * n + g * Dv;
    for (int64_t i = 0; i < Dv; ++i) out[i] += acc[i] * c;
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int64_t i = 0; i < Dv; ++i) out[i] *= inv;
}

}  // namespace ggl::GGL_ISA
