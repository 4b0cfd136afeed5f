// Rotary position embedding with optional YaRN frequency blending: the angles are
// core/rope_math.h's, which the CUDA kernel shares.
#include <cstring>

#include "ggml-like/cpu/op_thread.h"
#include "ggml-like/graph/graph.h"

#include "ggml-like/cpu/simd/set_declarations.h"

namespace ggl::GGL_ISA {

size_t cpu_rope_work(const Tensor& dst, int n_threads) {
  return scratch_size(static_cast<size_t>(dst.params[0].i) * sizeof(float)) * n_threads;
}

void cpu_rope(const Tensor& dst, const CpuThread& th) {
  const Tensor& a = *dst.src[0];
  const Tensor& pos = *dst.src[1];
  const float* ff = dst.src[2] ? reinterpret_cast<const float*>(dst.src[2]->data) : nullptr;
  const RopeArgs p = rope_args(dst);
  const int64_t D = a.ne[0], H = a.ne[1], T = a.ne[2], B = a.ne[3];
  const int half = p.n_rot / 2;
  float* cs = th.scratch<float>(scratch_size(p.n_rot * sizeof(float)));
  const auto* positions = reinterpret_cast<const int32_t*>(pos.data);

  auto [r0, r1] = split_range(H * T * B, th.ith, th.nth);
  int64_t cached = -1;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t h = r % H, t = (r / H) % T, b = r / (H * T);
    if (t != cached) {
      for (int i = 0; i < half; ++i) rope_cos_sin(p, i, positions[t], ff ? ff[i] : 1.0f, &cs[2 * i], &cs[2 * i + 1]);
      cached = t;
    }
    const float* x = a.f32_row(h, t, b);
    float* y = dst.f32_row(h, t, b);
    for (int i = 0; i < half; ++i) {
      int i0, i1;
      rope_pair(p, i, &i0, &i1);
      const float c = cs[2 * i], s = cs[2 * i + 1];
      const float x0 = x[i0], x1 = x[i1];
      y[i0] = x0 * c - x1 * s;
      y[i1] = x0 * s + x1 * c;
    }
    if (D > p.n_rot) std::memcpy(y + p.n_rot, x + p.n_rot, (D - p.n_rot) * sizeof(float));
  }
}

}  // namespace ggl::GGL_ISA
