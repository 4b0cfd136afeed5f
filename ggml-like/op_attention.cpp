// Causal attention with an online softmax (one pass over the keys, no score matrix), for any
// number of query heads per KV head (MHA, GQA, MQA). K and V rows are decoded once per key and
// used by every query head of their group. With fewer (token, KV head) items than threads — a
// decode step of MQA — the keys are split across threads and the partial softmax states merged.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ggml-like/cpu_kernels.h"
#include "ggml-like/dot.h"
#include "ggml-like/quant.h"

namespace ggl {
namespace {

struct Dims {
  int64_t Dk, Dv, H, Hkv, G, T, Nkv;
};

Dims dims_of(const Tensor& dst) {
  const Tensor& q = *dst.src[0];
  const Tensor& k = *dst.src[1];
  const Tensor& v = *dst.src[2];
  return {q.ne[0], v.ne[0], q.ne[1], k.ne[1], q.ne[1] / k.ne[1], q.ne[2], k.ne[2]};
}

// Per-thread scratch: decoded K row, decoded V row, and the running state of every head of a group.
struct Scratch {
  float* k;
  float* v;
  float* score;
  float* m;    // running max
  float* l;    // running sum of exp(score - m)
  float* acc;  // running sum of exp(score - m) * v, G rows of Dv
};

size_t scratch_floats(const Dims& d) { return d.Dk + d.Dv + 3 * d.G + d.G * d.Dv + 64; }
size_t per_thread_bytes(const Dims& d) { return scratch_size(scratch_floats(d) * sizeof(float)); }
// Partial states for the split-keys mode: per thread, G * (Dv + 2) floats.
size_t partial_floats(const Dims& d) { return d.G * (d.Dv + 2); }

Scratch scratch_for(const Dims& d, const CpuThread& th) {
  float* base = th.scratch<float>(per_thread_bytes(d));
  Scratch s;
  s.k = base;
  s.v = s.k + d.Dk;
  s.score = s.v + d.Dv;
  s.m = s.score + d.G;
  s.l = s.m + d.G;
  s.acc = s.l + d.G;
  return s;
}

// Online softmax over keys [j0, j1) for query token t and the G heads of KV head hkv.
void attend(const Tensor& dst, const Dims& d, int64_t t, int64_t hkv, int64_t j0, int64_t j1, const Scratch& s) {
  const Tensor& q = *dst.src[0];
  const Tensor& k = *dst.src[1];
  const Tensor& v = *dst.src[2];
  const float scale = dst.params[0].f;
  // MLA absorbed decode reads V as the leading part of the K rows: decode each row only once.
  const bool v_in_k = v.type == k.type && v.data == k.data && v.nb[1] == k.nb[1] && v.nb[2] == k.nb[2];

  std::fill(s.m, s.m + d.G, -INFINITY);
  std::fill(s.l, s.l + d.G, 0.0f);
  std::fill(s.acc, s.acc + d.G * d.Dv, 0.0f);
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* krow = k.row(hkv, j);
    const float* kf = reinterpret_cast<const float*>(krow);
    if (k.type != Type::F32) {
      dequantize_row(k.type, krow, s.k, d.Dk);
      kf = s.k;
    }
    const float* vf;
    if (v_in_k) {
      vf = kf;
    } else if (v.type == Type::F32) {
      vf = reinterpret_cast<const float*>(v.row(hkv, j));
    } else {
      dequantize_row(v.type, v.row(hkv, j), s.v, d.Dv);
      vf = s.v;
    }
    for (int64_t g = 0; g < d.G; ++g) {
      const float score = dot_row(Type::F32, kf, q.f32_row(hkv * d.G + g, t), d.Dk) * scale;
      float* acc = s.acc + g * d.Dv;
      if (score > s.m[g]) {
        const float c = std::exp(s.m[g] - score);  // 0 for the first key
        s.l[g] = s.l[g] * c + 1.0f;
        for (int64_t i = 0; i < d.Dv; ++i) acc[i] = acc[i] * c + vf[i];
        s.m[g] = score;
      } else {
        const float p = std::exp(score - s.m[g]);
        s.l[g] += p;
        for (int64_t i = 0; i < d.Dv; ++i) acc[i] += p * vf[i];
      }
    }
  }
}

int64_t visible_keys(const Tensor& dst, const Dims& d, int64_t t) {
  const int32_t pos = reinterpret_cast<const int32_t*>(dst.src[3]->data)[t];
  return std::clamp<int64_t>(static_cast<int64_t>(pos) + 1, 0, d.Nkv);
}

}  // namespace

size_t cpu_flash_attn_work(const Tensor& dst, int n_threads) {
  const Dims d = dims_of(dst);
  return per_thread_bytes(d) * n_threads + scratch_size(partial_floats(d) * n_threads * sizeof(float));
}

void cpu_flash_attn(const Tensor& dst, const CpuThread& th) {
  const Dims d = dims_of(dst);
  const Scratch s = scratch_for(d, th);
  const int64_t items = d.T * d.Hkv;

  if (items >= th.nth) {
    auto [i0, i1] = split_range(items, th.ith, th.nth);
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t t = item / d.Hkv, hkv = item % d.Hkv;
      attend(dst, d, t, hkv, 0, visible_keys(dst, d, t), s);
      for (int64_t g = 0; g < d.G; ++g) {
        float* out = dst.f32_row(hkv * d.G + g, t);
        const float inv = s.l[g] > 0.0f ? 1.0f / s.l[g] : 0.0f;
        for (int64_t i = 0; i < d.Dv; ++i) out[i] = s.acc[g * d.Dv + i] * inv;
      }
    }
    return;
  }

  // Split-keys mode: every thread takes a slice of the keys of each item, then the slices merge.
  float* partials = reinterpret_cast<float*>(th.work + per_thread_bytes(d) * th.nth);
  const int64_t stride = partial_floats(d);
  for (int64_t item = 0; item < items; ++item) {
    const int64_t t = item / d.Hkv, hkv = item % d.Hkv;
    auto [j0, j1] = split_range(visible_keys(dst, d, t), th.ith, th.nth);
    attend(dst, d, t, hkv, j0, j1, s);
    float* mine = partials + th.ith * stride;
    std::memcpy(mine, s.m, d.G * sizeof(float));
    std::memcpy(mine + d.G, s.l, d.G * sizeof(float));
    std::memcpy(mine + 2 * d.G, s.acc, d.G * d.Dv * sizeof(float));
    th.barrier();
    auto [g0, g1] = split_range(d.G, th.ith, th.nth);
    for (int64_t g = g0; g < g1; ++g) {
      float m = -INFINITY;
      for (int w = 0; w < th.nth; ++w) m = std::fmax(m, partials[w * stride + g]);
      float* out = dst.f32_row(hkv * d.G + g, t);
      std::fill(out, out + d.Dv, 0.0f);
      float l = 0.0f;
      for (int w = 0; w < th.nth; ++w) {
        const float* part = partials + w * stride;
        if (part[d.G + g] == 0.0f) continue;  // an empty slice
        const float c = std::exp(part[g] - m);
        l += part[d.G + g] * c;
        const float* acc = part + 2 * d.G + g * d.Dv;
        for (int64_t i = 0; i < d.Dv; ++i) out[i] += acc[i] * c;
      }
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      for (int64_t i = 0; i < d.Dv; ++i) out[i] *= inv;
    }
    th.barrier();
  }
}

}  // namespace ggl
