// Causal attention with an online softmax (one pass over the keys, no score matrix), for any
// number of query heads per KV head (MHA, GQA, MQA). K and V rows are decoded once per key and
// used by every query head of their group. With fewer (token, KV head) items than threads — a
// decode step of MQA — the keys are split across threads and the partial softmax states merged.
//
// Groups of several heads (GQA, and MLA's absorbed MQA with every head on one latent cache) run
// "heads on lanes" where the kernel set has vectors (attention_wide.h): the 16 heads of a chunk sit
// in the lanes of one AVX-512 vector, two AVX2 ones or four NEON ones, so a key block's scores are a [16 x Dk] by
// [Dk x 32] product of broadcast key elements and the weighted sum of values a [16 x 32] by
// [32 x Dv] one; each cached row is read once for all heads, there are no horizontal sums, and the
// softmax is updated once per block of keys. MHA prefill (one head per KV head, as MLA's naive
// form) puts 32 consecutive tokens of one head on the lanes of two AVX-512 (four AVX2, eight NEON)
// vectors instead, each lane masked causally: every key row is read once per 32 queries. The walk is
// written once over the vector; only the number of vectors per pass follows the lane count.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ggml-like/cpu/op_thread.h"

#include "ggml-like/cpu/simd/attention_merge.h"
#include "ggml-like/cpu/simd/attention_wide.h"
#include "ggml-like/quant/quant.h"

#include "ggml-like/cpu/simd/set_declarations.h"

namespace ggl::GGL_ISA {
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

// Wide scratch (see the file comment): transposed scaled queries [Dk][lanes], transposed
// accumulators [Dv][lanes], a block's scores [kKeyBlock][lanes], and its decoded K and V rows.
constexpr int64_t kMaxLanes = 32;
constexpr int64_t kKeyBlock = 32;
// Independent accumulators in the score and value loops: with the lane vectors of a pass (up to 4
// with AVX2's 16 registers, 8 with NEON's 32) and a broadcast they fit the registers.
constexpr int kAccumulators = 8;
static_assert(kKeyBlock % kAccumulators == 0, "score groups (accumulators / lane vectors keys) must tile a key block");
size_t wide_floats(const Dims& d) { return kMaxLanes * (d.Dk + d.Dv + kKeyBlock) + kKeyBlock * (d.Dk + d.Dv) + 64; }

size_t scratch_floats(const Dims& d) { return d.Dk + d.Dv + 3 * d.G + d.G * d.Dv + 64 + wide_floats(d); }
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

#if defined(GGL_ATTN_WIDE)
float* wide_scratch(const Dims& d, const Scratch& s) {
  float* p = s.acc + d.G * d.Dv;
  return p + (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64 / sizeof(float);  // 64-byte aligned
}
#endif

int64_t visible_keys(const Tensor& dst, const Dims& d, int64_t t) {
  const int32_t pos = reinterpret_cast<const int32_t*>(dst.src[3]->data)[t];
  return std::clamp<int64_t>(static_cast<int64_t>(pos) + 1, 0, d.Nkv);
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
      decode_row(k.type, krow, s.k, d.Dk);
      kf = s.k;
    }
    const float* vf;
    if (v_in_k) {
      vf = kf;
    } else if (v.type == Type::F32) {
      vf = reinterpret_cast<const float*>(v.row(hkv, j));
    } else {
      decode_row(v.type, v.row(hkv, j), s.v, d.Dv);
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

#if defined(GGL_ATTN_WIDE)
// Heads per heads-on-lanes pass:
constexpr int64_t kHeadLanes = 16;
// MHA batches of at least this many tokens put tokens on lanes, up to kMaxLanes per pass (they
// share each key row read).
constexpr int64_t kMinTokenLanes = 4;
using attention_wide::in_register;
using attention_wide::kLanes;
using attention_wide::Vec;
// Lane vectors per pass: 1, 2, (8 lanes) 4 or (4 lanes) 8.
constexpr int kMaxVecs = static_cast<int>(kMaxLanes / kLanes);
static_assert(kMaxLanes % kLanes == 0 && kHeadLanes % kLanes == 0, "passes hold whole vectors");
static_assert(kAccumulators + kMaxVecs + 1 <= attention_wide::kRegisters, "a pass's loops fit the registers");

// The queries one wide pass serves, one per lane: several heads of one token (GQA/MQA), or one
// head at several consecutive tokens (MHA prefill). Lane i sees keys [j0, visible[i]); lanes past
// n are unused (zero queries that see every key).
struct Lanes {
  int64_t n = 0;
  const float* q[kMaxLanes];
  int64_t visible[kMaxLanes];
};

// What a pass leaves: per lane the running max and sum, and the accumulators transposed,
// [Dv][width] (lane i of element e at acc[e * width + i]; width = NV * kLanes).
struct WideState {
  float* acc;
  int64_t width;
  alignas(64) float m[kMaxLanes];
  alignas(64) float l[kMaxLanes];
};

// Online softmax over keys [j0, j1) of KV head hkv for NV vectors of lanes at once: each key row
// is read (and decoded) once for all of them.
template <int NV>
void attend_wide(const Tensor& dst, const Dims& d, int64_t hkv, const Lanes& lanes, int64_t j0, int64_t j1,
                 const Scratch& s, WideState& out) {
  constexpr int64_t W = NV * kLanes;  // lanes per row of the transposed buffers
  const Tensor& k = *dst.src[1];
  const Tensor& v = *dst.src[2];
  const float scale = dst.params[0].f;
  const bool v_in_k = v.type == k.type && v.data == k.data && v.nb[1] == k.nb[1] && v.nb[2] == k.nb[2];
  float* qt = wide_scratch(d, s);
  float* acc = qt + W * d.Dk;
  float* sc = acc + W * d.Dv;
  float* krows_f = sc + W * kKeyBlock;
  float* vrows_f = krows_f + kKeyBlock * d.Dk;
  out.acc = acc;
  out.width = W;

  // Scaled queries, transposed; unused lanes are zero (their scores are 0 and ignored).
  alignas(64) float limit[W];
  for (int64_t g = 0; g < W; ++g) {
    const float* qr = g < lanes.n ? lanes.q[g] : nullptr;
    for (int64_t i = 0; i < d.Dk; ++i) qt[i * W + g] = qr ? qr[i] * scale : 0.0f;
    limit[g] = static_cast<float>(g < lanes.n ? std::min(lanes.visible[g], j1) : j1);
  }
  int64_t j_end = j0;  // keys past every lane's limit are skipped
  for (int64_t g = 0; g < W; ++g) j_end = std::max(j_end, static_cast<int64_t>(limit[g]));
  attention_wide::PassLanes<NV> pass(limit, j_end);
  Vec* m = pass.m;
  Vec* l = pass.l;
  const bool masked = pass.masked;
  std::fill(acc, acc + W * d.Dv, 0.0f);

  // Keys per score group, and value elements per output group: kAccumulators vectors in all.
  constexpr int kGroup = kAccumulators / NV;
  const float* krow[kKeyBlock];
  const float* vrow[kKeyBlock];
  for (int64_t jb = j0; jb < j_end; jb += kKeyBlock) {
    const int64_t nk = std::min(kKeyBlock, j_end - jb);
    for (int64_t j = 0; j < nk; ++j) {
      const uint8_t* kr = k.row(hkv, jb + j);
      if (k.type == Type::F32) {
        krow[j] = reinterpret_cast<const float*>(kr);
      } else {
        decode_row(k.type, kr, krows_f + j * d.Dk, d.Dk);
        krow[j] = krows_f + j * d.Dk;
      }
      if (v_in_k) {
        vrow[j] = krow[j];
      } else if (v.type == Type::F32) {
        vrow[j] = reinterpret_cast<const float*>(v.row(hkv, jb + j));
      } else {
        decode_row(v.type, v.row(hkv, jb + j), vrows_f + j * d.Dv, d.Dv);
        vrow[j] = vrows_f + j * d.Dv;
      }
    }
    // Scores, kGroup keys at a time; a short last group repeats key 0.
    for (int64_t j = 0; j < nk; j += kGroup) {
      const float* kk[kGroup];
      for (int i = 0; i < kGroup; ++i) kk[i] = krow[j + i < nk ? j + i : 0];
      Vec a[kGroup][NV];
      for (auto& row : a)
        for (auto& x : row) x = Vec(0.0f);
      for (int64_t i = 0; i < d.Dk; ++i) {
        Vec qv[NV];
        for (int u = 0; u < NV; ++u) {
          qv[u] = Vec::load_aligned(qt + i * W + u * kLanes);
          in_register(qv[u]);
        }
        for (int r = 0; r < kGroup; ++r) {
          const Vec kv(kk[r][i]);
          for (int u = 0; u < NV; ++u) a[r][u] = xsimd::fma(qv[u], kv, a[r][u]);
        }
      }
      // All kGroup rows are stored (rows past nk are never read; the block has room): a loop with
      // a constant trip count keeps the accumulators in registers.
      for (int r = 0; r < kGroup; ++r)
        for (int u = 0; u < NV; ++u) {
          Vec score = a[r][u];
          if (masked) score = pass.mask(score, jb + j + r, u);
          score.store_aligned(sc + (j + r) * W + u * kLanes);
        }
    }
    Vec c[NV];
    attention_wide::softmax_block<NV>(sc, nk, masked, m, l, c);
    // acc[i] = acc[i] * c + sum_j p_j * v_j[i], kGroup value elements at a time.
    int64_t i = 0;
    for (; i + kGroup <= d.Dv; i += kGroup) {
      Vec o[kGroup][NV];
      for (int r = 0; r < kGroup; ++r)
        for (int u = 0; u < NV; ++u) o[r][u] = Vec::load_aligned(acc + (i + r) * W + u * kLanes) * c[u];
      for (int64_t j = 0; j < nk; ++j) {
        Vec p[NV];
        for (int u = 0; u < NV; ++u) {
          p[u] = Vec::load_aligned(sc + j * W + u * kLanes);
          in_register(p[u]);
        }
        const float* vr = vrow[j] + i;
        for (int r = 0; r < kGroup; ++r) {
          const Vec vv(vr[r]);
          for (int u = 0; u < NV; ++u) o[r][u] = xsimd::fma(p[u], vv, o[r][u]);
        }
      }
      for (int r = 0; r < kGroup; ++r)
        for (int u = 0; u < NV; ++u) o[r][u].store_aligned(acc + (i + r) * W + u * kLanes);
    }
    for (; i < d.Dv; ++i)
      for (int u = 0; u < NV; ++u) {
        Vec o = Vec::load_aligned(acc + i * W + u * kLanes) * c[u];
        for (int64_t j = 0; j < nk; ++j) o = xsimd::fma(Vec::load_aligned(sc + j * W + u * kLanes), Vec(vrow[j][i]), o);
        o.store_aligned(acc + i * W + u * kLanes);
      }
  }
  for (int u = 0; u < NV; ++u) {
    m[u].store_aligned(out.m + u * kLanes);
    l[u].store_aligned(out.l + u * kLanes);
  }
}

// attend_wide with the fewest vectors that hold the lanes' queries.
void attend_lanes(const Tensor& dst, const Dims& d, int64_t hkv, const Lanes& lanes, int64_t j0, int64_t j1,
                  const Scratch& s, WideState& out) {
  if (lanes.n <= kLanes) return attend_wide<1>(dst, d, hkv, lanes, j0, j1, s, out);
  if (kMaxVecs == 2 || lanes.n <= 2 * kLanes) return attend_wide<2>(dst, d, hkv, lanes, j0, j1, s, out);
  if constexpr (kMaxVecs >= 4)
    if (kMaxVecs == 4 || lanes.n <= 4 * kLanes) return attend_wide<4>(dst, d, hkv, lanes, j0, j1, s, out);
  if constexpr (kMaxVecs == 8) return attend_wide<8>(dst, d, hkv, lanes, j0, j1, s, out);
}

// Heads [g0, g0 + gn) of KV head hkv at token t, heads on lanes; leaves the same state as
// attend() for those heads.
void attend_heads_wide(const Tensor& dst, const Dims& d, int64_t t, int64_t hkv, int64_t g0, int64_t gn, int64_t j0,
                       int64_t j1, const Scratch& s) {
  const Tensor& q = *dst.src[0];
  Lanes lanes;
  lanes.n = gn;
  for (int64_t g = 0; g < gn; ++g) {
    lanes.q[g] = q.f32_row(hkv * d.G + g0 + g, t);
    lanes.visible[g] = j1;
  }
  WideState st;
  attend_lanes(dst, d, hkv, lanes, j0, j1, s, st);
  for (int64_t g = 0; g < gn; ++g) {
    s.m[g0 + g] = st.m[g];
    s.l[g0 + g] = st.l[g];
    float* out = s.acc + (g0 + g) * d.Dv;
    for (int64_t i = 0; i < d.Dv; ++i) out[i] = st.acc[i * st.width + g];
  }
}

// MHA prefill: head h at tokens [t0, t0 + tn) (tn <= kMaxLanes), tokens on lanes, each masked
// causally; writes the normalised outputs.
void attend_tokens_wide(const Tensor& dst, const Dims& d, int64_t h, int64_t t0, int64_t tn, const Scratch& s) {
  const Tensor& q = *dst.src[0];
  Lanes lanes;
  lanes.n = tn;
  int64_t last = 0;
  for (int64_t i = 0; i < tn; ++i) {
    lanes.q[i] = q.f32_row(h, t0 + i);
    lanes.visible[i] = visible_keys(dst, d, t0 + i);
    last = std::max(last, lanes.visible[i]);
  }
  WideState st;
  attend_lanes(dst, d, h, lanes, 0, last, s, st);
  for (int64_t i = 0; i < tn; ++i) {
    float* out = dst.f32_row(h, t0 + i);
    const float inv = st.l[i] > 0.0f ? 1.0f / st.l[i] : 0.0f;
    for (int64_t e = 0; e < d.Dv; ++e) out[e] = st.acc[e * st.width + i] * inv;
  }
}
#endif

// Every head of KV head hkv: heads on lanes for groups of several heads, else one head at a time.
void attend_group(const Tensor& dst, const Dims& d, int64_t t, int64_t hkv, int64_t j0, int64_t j1, const Scratch& s) {
#if defined(GGL_ATTN_WIDE)
  if (d.G >= 2) {
    for (int64_t g0 = 0; g0 < d.G; g0 += kHeadLanes)
      attend_heads_wide(dst, d, t, hkv, g0, std::min<int64_t>(kHeadLanes, d.G - g0), j0, j1, s);
    return;
  }
#endif
  attend(dst, d, t, hkv, j0, j1, s);
}

// Whether the 16-bit kernels take the node. Batch-invariant graphs keep MHA (one head per KV head)
// on the float path below, item by item: the integer MHA kernel is for prefill alone (a decode
// token would take another path), and puts several tokens on one pass.
bool takes_int16(const Tensor& dst, bool batch_invariant) {
  return attention_int16_applies(dst) && !(batch_invariant && dims_of(dst).G == 1);
}

// The batch-invariant area of a thread (attention_merge.h), after the float kernels' scratch.
size_t invariant_area(const Dims& d) { return invariant_area_floats(d.Nkv, d.G, d.Dv); }

}  // namespace

size_t cpu_flash_attn_work(const Tensor& dst, int n_threads, bool batch_invariant) {
  if (takes_int16(dst, batch_invariant)) return attention_int16_work(dst, n_threads, batch_invariant);
  const Dims d = dims_of(dst);
  if (batch_invariant) return (per_thread_bytes(d) + scratch_size(invariant_area(d) * sizeof(float))) * n_threads;
  return per_thread_bytes(d) * n_threads + scratch_size(partial_floats(d) * n_threads * sizeof(float));
}

void cpu_flash_attn(const Tensor& dst, const CpuThread& th) {
  const Dims d = dims_of(dst);
  const Scratch s = scratch_for(d, th);
  const int64_t items = d.T * d.Hkv;

  if (takes_int16(dst, th.batch_invariant)) {
    count_path(CpuPath::kAttentionInt16, th);
    return attention_int16(dst, th);
  }
  if (th.batch_invariant) {
    // Items are (token, KV head), each over fixed chunks of its keys.
    const size_t area = scratch_size(invariant_area(d) * sizeof(float)) / sizeof(float);
    float* areas = reinterpret_cast<float*>(th.work + per_thread_bytes(d) * th.nth);
    attend_invariant(
        th, areas, area, items, d.Dv, [&](int64_t) { return d.G; },
        [&](int64_t item) { return visible_keys(dst, d, item / d.Hkv); },
        [&](int64_t item, int64_t j0, int64_t j1, float* state) {
          attend_group(dst, d, item / d.Hkv, item % d.Hkv, j0, j1, s);
          std::memcpy(state, s.m, d.G * sizeof(float));
          std::memcpy(state + d.G, s.l, d.G * sizeof(float));
          std::memcpy(state + 2 * d.G, s.acc, d.G * d.Dv * sizeof(float));
        },
        [&](int64_t item, int64_t g) { return dst.f32_row((item % d.Hkv) * d.G + g, item / d.Hkv); });
    return;
  }
#if defined(GGL_ATTN_WIDE)
  // MHA prefill: blocks of 32 consecutive tokens of one head share every key row. Items are
  // dealt round-robin: later token blocks see more keys, so contiguous ranges would not balance.
  if (d.G == 1 && d.T >= kMinTokenLanes) {
    const int64_t blocks = (d.T + kMaxLanes - 1) / kMaxLanes;
    for (int64_t item = th.ith; item < blocks * d.H; item += th.nth) {
      const int64_t t0 = (item / d.H) * kMaxLanes, h = item % d.H;
      attend_tokens_wide(dst, d, h, t0, std::min(kMaxLanes, d.T - t0), s);
    }
    return;
  }
#endif

  if (items >= th.nth) {
    auto [i0, i1] = split_range(items, th.ith, th.nth);
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t t = item / d.Hkv, hkv = item % d.Hkv;
      attend_group(dst, d, t, hkv, 0, visible_keys(dst, d, t), s);
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
    attend_group(dst, d, t, hkv, j0, j1, s);
    float* mine = partials + th.ith * stride;
    std::memcpy(mine, s.m, d.G * sizeof(float));
    std::memcpy(mine + d.G, s.l, d.G * sizeof(float));
    std::memcpy(mine + 2 * d.G, s.acc, d.G * d.Dv * sizeof(float));
    th.barrier();
    auto [g0, g1] = split_range(d.G, th.ith, th.nth);
    for (int64_t g = g0; g < g1; ++g)
      merge_partial_states(partials, stride, th.nth, d.G, d.Dv, g, dst.f32_row(hkv * d.G + g, t));
    th.barrier();
  }
}

}  // namespace ggl::GGL_ISA
