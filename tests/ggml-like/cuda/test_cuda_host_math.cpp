// The CUDA kernels' per-thread arithmetic (ggml-like/cuda/cuda_math.h), compiled for the host and
// checked against the CPU backend's ops: element decode and q8_0 bytes (exact), the rope of
// rows with YaRN, top-k walked the way the kernel's warp walks it (32 strided lanes, a butterfly
// reduction; exact indices), the MLA decode kernels' own phases (mla_decode_block.h) run over
// every block and thread index, and the general attention kernel's key-by-key walk. Runs in every
// build: this is what can be checked of the kernels on a machine without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/cuda/cuda_math.h"
#include "ggml-like/cuda/mla_decode_block.h"
#include "ggml-like/graph/graph.h"
#include "ggml-like/quant/quant.h"
#include "tests/support/random_floats.h"

namespace test_cuda_host_math {

namespace cm = ggl::cuda;
using ggl::Graph;
using ggl::Tensor;
using ggl::Type;
using latte::testing::random_floats;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

cm::Elem elem(Type t) {
  switch (t) {
    case Type::F16: return cm::Elem::kF16;
    case Type::BF16: return cm::Elem::kBF16;
    case Type::Q8_0: return cm::Elem::kQ8_0;
    default: return cm::Elem::kF32;
  }
}

// Runs g on a one-thread CPU backend and returns out as floats (i32 converted).
std::vector<float> run_cpu(Graph& g, Tensor* out) {
  g.mark_output(out);
  ggl::CpuBackend cpu(1);
  cpu.compute(g);
  std::vector<float> result(static_cast<size_t>(out->n_elements()));
  if (out->type == Type::I32) {
    std::vector<int32_t> ids(result.size());
    cpu.read(*out, ids.data(), 0, ids.size() * sizeof(int32_t));
    std::copy(ids.begin(), ids.end(), result.begin());
  } else {
    cpu.read(*out, result.data(), 0, result.size() * sizeof(float));
  }
  return result;
}

// The f16 / bf16 scalars are core/half_bits.h, the CPU's own conversions (test_fp16 checks them).
// Element decode of every cache type against the CPU's row decoding (f16 rows through the
// CPU's conversion instructions where it has them).
TEST(CudaHostMath, ElementDecodeMatchesTheRowDecode) {
  constexpr int64_t n = 4 * cm::kQ8Block;
  const std::vector<float> x = random_floats(n, 5, 4.0f);
  for (Type t : {Type::F32, Type::F16, Type::BF16, Type::Q8_0}) {
    std::vector<uint8_t> row(ggl::row_bytes(t, n));
    ggl::quantize_row(t, x.data(), row.data(), n);
    std::vector<float> want(n);
    ggl::dequantize_row(t, row.data(), want.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(bits(cm::load_element(elem(t), row.data(), i)), bits(want[i])) << ggl::type_name(t) << " " << i;
  }
}

TEST(CudaHostMath, Q8_0BlocksMatchTheQuantizer) {
  constexpr int64_t n = 8 * cm::kQ8Block;
  std::vector<float> x = random_floats(n, 7, 3.0f);
  std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // an all-zero block
  x[70] = 1e6f;                                     // a block with an outlier
  x[100] = -0.5f * 127.0f;                          // values on quant ties
  std::vector<uint8_t> want(ggl::row_bytes(Type::Q8_0, n));
  ggl::quantize_row(Type::Q8_0, x.data(), want.data(), n);
  // The copy kernel's block: the largest magnitude (a warp max), the scale, then each quant.
  std::vector<uint8_t> got(want.size());
  for (int64_t b = 0; b < n / cm::kQ8Block; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < cm::kQ8Block; ++j) amax = fmaxf(amax, fabsf(x[b * cm::kQ8Block + j]));
    const float scale = cm::q8_0_scale(amax);
    uint8_t* block = got.data() + b * cm::kQ8BlockBytes;
    const uint16_t h = ggl::float_to_half(scale);
    block[0] = static_cast<uint8_t>(h & 0xff);
    block[1] = static_cast<uint8_t>(h >> 8);
    for (int j = 0; j < cm::kQ8Block; ++j)
      block[2 + j] = static_cast<uint8_t>(cm::q8_0_quant(x[b * cm::kQ8Block + j], scale));
  }
  EXPECT_EQ(got, want);
}

// The rope kernel's arithmetic on [D, H, T] rows against the CPU op.
void check_rope(const ggl::RopeParams& p, bool with_factors) {
  const int64_t D = 96, H = 3;
  const std::vector<int32_t> positions = {0, 1, 7, 511, 4095, 100000};
  const int64_t T = static_cast<int64_t>(positions.size());
  std::vector<float> x = random_floats(D * H * T, 11);
  std::vector<float> factors(p.n_rot / 2);
  for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 0.37f * static_cast<float>(i);

  Graph g;
  Tensor* a = g.external(Type::F32, std::vector<int64_t>{D, H, T}, x.data(), "x");
  Tensor* ff = with_factors ? g.external(Type::F32, std::vector<int64_t>{p.n_rot / 2}, factors.data(), "ff") : nullptr;
  Tensor* node = g.rope(a, g.input_i32(positions, "pos"), p, ff);
  const std::vector<float> want = run_cpu(g, node);

  const ggl::RopeArgs r = ggl::rope_args(*node);
  std::vector<float> got(x.size());
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> cs(p.n_rot);
    for (int i = 0; i < p.n_rot / 2; ++i)
      ggl::rope_cos_sin(r, i, positions[t], with_factors ? factors[i] : 1.0f, &cs[2 * i], &cs[2 * i + 1]);
    for (int64_t h = 0; h < H; ++h) {
      const float* in = x.data() + (t * H + h) * D;
      float* out = got.data() + (t * H + h) * D;
      std::copy(in + p.n_rot, in + D, out + p.n_rot);
      for (int i = 0; i < p.n_rot / 2; ++i) {
        int i0, i1;
        ggl::rope_pair(r, i, &i0, &i1);
        out[i0] = in[i0] * cs[2 * i] - in[i1] * cs[2 * i + 1];
        out[i1] = in[i0] * cs[2 * i + 1] + in[i1] * cs[2 * i];
      }
    }
  }
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5f * std::max(1.0f, std::fabs(want[i]))) << i;
}

TEST(CudaHostMath, RopeMatchesTheCpuOp) {
  // DeepSeek-V2's YaRN (scaling 40 from 4096, mscale folded into attn_factor), on normal pairs.
  check_rope({.n_rot = 64,
              .neox = false,
              .freq_base = 10000.0f,
              .freq_scale = 1.0f / 40.0f,
              .ext_factor = 1.0f,
              .attn_factor = 1.3689f,
              .beta_fast = 32.0f,
              .beta_slow = 1.0f,
              .n_ctx_orig = 4096},
             false);
  // Llama's neox pairs with per-pair frequency factors, part of the row rotated.
  check_rope({.n_rot = 64, .neox = true, .freq_base = 500000.0f}, true);
  check_rope({.n_rot = 96, .neox = false, .freq_base = 10000.0f, .freq_scale = 0.5f}, false);
}

// The top-k kernel's selection, one warp per row: groups ranked by rounds over a lane per group,
// then k rounds in which 32 lanes scan strided shares and a butterfly keeps the best.
std::vector<int32_t> warp_top_k(const float* v, int64_t n, const ggl::TopKParams& p) {
  constexpr int kLanes = 32;
  const auto warp_best = [&](const float* values, const uint8_t* allowed, int64_t count) {
    float bv[kLanes];
    int32_t bi[kLanes];
    for (int lane = 0; lane < kLanes; ++lane) {
      bv[lane] = 0.0f;
      bi[lane] = -1;
      cm::topk_scan(values, allowed, lane, count, kLanes, bv[lane], bi[lane]);
    }
    for (int o = kLanes / 2; o > 0; o /= 2) {
      float nv[kLanes];
      int32_t ni[kLanes];
      for (int lane = 0; lane < kLanes; ++lane) {
        const int other = lane ^ o;
        const bool take =
            bi[other] >= 0 && (bi[lane] < 0 || ggl::topk_before(bv[other], bi[other], bv[lane], bi[lane]));
        nv[lane] = take ? bv[other] : bv[lane];
        ni[lane] = take ? bi[other] : bi[lane];
      }
      std::copy(nv, nv + kLanes, bv);
      std::copy(ni, ni + kLanes, bi);
    }
    for (int lane = 1; lane < kLanes; ++lane) EXPECT_EQ(bi[lane], bi[0]) << "lanes disagree";
    return bi[0];
  };
  std::vector<uint8_t> allowed(n, p.n_groups > 1 ? 0 : 1);
  if (p.n_groups > 1) {
    const int64_t group = n / p.n_groups;
    std::vector<float> scores(p.n_groups);
    std::vector<uint8_t> free(p.n_groups, 1);
    for (int g = 0; g < p.n_groups; ++g) scores[g] = ggl::topk_group_score(v + g * group, group);
    for (int round = 0; round < p.n_groups_used; ++round) {
      const int32_t g = warp_best(scores.data(), free.data(), p.n_groups);
      std::fill(allowed.begin() + g * group, allowed.begin() + (g + 1) * group, 1);
      free[g] = 0;
    }
  }
  std::vector<int32_t> out;
  for (int round = 0; round < p.k; ++round) {
    const int32_t i = warp_best(v, allowed.data(), n);
    out.push_back(i);
    allowed[i] = 0;
  }
  return out;
}

TEST(CudaHostMath, TopKMatchesTheCpuOp) {
  struct Case {
    int64_t n, rows;
    ggl::TopKParams p;
  };
  for (const Case& c : {Case{64, 5, {.k = 6}}, Case{160, 4, {.k = 6, .n_groups = 8, .n_groups_used = 3}},
                        Case{256, 3, {.k = 8, .n_groups = 8, .n_groups_used = 4}}, Case{7, 3, {.k = 7}},
                        Case{100, 2, {.k = 5, .n_groups = 100, .n_groups_used = 9}}}) {
    std::vector<float> v = random_floats(c.n * c.rows, static_cast<uint32_t>(c.n));
    for (size_t i = 0; i < v.size(); ++i)
      if (i % 3 == 0) v[i] = std::round(v[i] * 2.0f) / 2.0f;  // many ties
    Graph g;
    Tensor* a = g.external(Type::F32, std::vector<int64_t>{c.n, c.rows}, v.data(), "v");
    const std::vector<float> want = run_cpu(g, g.top_k(a, c.p));
    for (int64_t r = 0; r < c.rows; ++r) {
      const std::vector<int32_t> got = warp_top_k(v.data() + r * c.n, c.n, c.p);
      for (int i = 0; i < c.p.k; ++i)
        ASSERT_EQ(got[i], static_cast<int32_t>(want[r * c.p.k + i])) << "n " << c.n << " row " << r << " rank " << i;
    }
  }
}

// A cache of n rows of `width` values of type t (row stride row_bytes), from random values.
struct Cache {
  Type type;
  int64_t width, rows;
  size_t row;
  std::vector<uint8_t> bytes;
  Cache(Type t, int64_t w, int64_t n, uint32_t seed) : type(t), width(w), rows(n), row(ggl::row_bytes(t, w)) {
    const std::vector<float> x = random_floats(w * n, seed);
    bytes.resize(row * n);
    for (int64_t j = 0; j < n; ++j) ggl::quantize_row(t, x.data() + j * w, bytes.data() + j * row, w);
  }
  const uint8_t* at(int64_t j) const { return bytes.data() + j * row; }
};

// The MLA decode kernels run on the host: every block (split, token, head group) of the first
// kernel phase by phase over its thread indices (each phase a barrier apart, as on the device),
// then the merge kernel's steps for every (token, head). Shared memory and the work buffer start
// as NaNs, so a phase that reads what no thread wrote spoils the result.
std::vector<float> mla_decode_blocks(const Cache& c, const std::vector<float>& q, int64_t H, int64_t Dv,
                                     const std::vector<int32_t>& positions, float scale, int splits) {
  namespace mla = cm::mla;
  const int64_t Dk = c.width, T = static_cast<int64_t>(positions.size());
  const mla::Problem p{c.bytes.data(),
                       static_cast<int64_t>(c.row),
                       elem(c.type),
                       Dk,
                       Dv,
                       H,
                       c.rows,
                       reinterpret_cast<const uint8_t*>(q.data()),
                       Dk * 4,
                       H * Dk * 4,
                       scale};
  const int64_t per_split = cm::split_keys(c.rows, splits, mla::kTile);
  std::vector<float> work(mla::work_floats(H, T, Dv, splits), NAN);
  for (int split = 0; split < splits; ++split)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h0 = 0; h0 < H; h0 += mla::kHeads) {
        std::vector<float> shared(mla::layout(Dk).total, NAN);
        std::vector<mla::Registers> regs(mla::kThreads);
        for (auto& r : regs) mla::start(r);
        for (int tid = 0; tid < mla::kThreads; ++tid) mla::load_queries(p, t, h0, tid, shared.data());
        int64_t j0, j1;
        mla::chunk(p, positions[t], split, per_split, &j0, &j1);
        for (int64_t jt = j0; jt < j1; jt += mla::kTile) {
          const int n = static_cast<int>(std::min<int64_t>(mla::kTile, j1 - jt));
          for (int tid = 0; tid < mla::kThreads; ++tid) mla::load_tile(p, jt, n, tid, shared.data());
          for (int tid = 0; tid < mla::kThreads; ++tid) mla::score(p, tid, shared.data());
          for (int tid = 0; tid < mla::kHeads; ++tid) mla::update_softmax(p, tid, n, regs[tid], shared.data());
          for (int tid = 0; tid < mla::kThreads; ++tid) mla::accumulate(p, tid, n, regs[tid], shared.data());
        }
        for (int tid = 0; tid < mla::kThreads; ++tid)
          mla::write_part(p, t, h0, split, splits, tid, regs[tid], work.data());
      }
  std::vector<float> out(Dv * H * T);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const float m = mla::merged_max(work.data(), p, splits, t, h);
      std::vector<float> weight(splits);
      for (int s = 0; s < splits; ++s)
        weight[s] = cm::merge_weight(mla::part_state(work.data(), p, splits, t, h, s), m);
      const float inverse = mla::merged_inverse(work.data(), p, splits, t, h, weight.data());
      for (int64_t e = 0; e < Dv; ++e)
        out[(t * H + h) * Dv + e] = mla::merged_value(work.data(), p, splits, t, h, weight.data(), inverse, e);
    }
  return out;
}

TEST(CudaHostMath, MlaDecodeBlocksMatchTheCpuAttention) {
  // DeepSeek's absorbed decode: 576-value rows (512 latent + 64 rope), V the latent; 16 heads
  // (one head group) and 20 (a second group with 4 heads); one or two tokens.
  const int64_t Dk = 576, Dv = 512, N = 300;
  const float scale = 0.1352f;
  struct Case {
    Type type;
    int64_t H;
    std::vector<int32_t> positions;
    int splits;  // 64 splits of 16 keys: chunks past the visible keys are empty
  };
  for (const Case& c :
       {Case{Type::F16, 16, {299}, 5}, Case{Type::F16, 16, {150}, 64}, Case{Type::Q8_0, 20, {299, 3}, 7},
        Case{Type::BF16, 16, {200, 201}, 1}, Case{Type::F32, 20, {0}, 3}}) {
    const Cache cache(c.type, Dk, N, 21);
    const int64_t T = static_cast<int64_t>(c.positions.size());
    std::vector<float> q = random_floats(Dk * c.H * T, 22, 0.3f);
    Graph g;
    Tensor* kv = g.external(c.type, std::vector<int64_t>{Dk, N}, cache.bytes.data(), "cache");
    Tensor* K = g.view(kv, {Dk, 1, N, 1}, {kv->nb[0], cache.row, cache.row, cache.row * N}, 0);
    Tensor* V = g.view(kv, {Dv, 1, N, 1}, {kv->nb[0], cache.row, cache.row, cache.row * N}, 0);
    Tensor* qt = g.external(Type::F32, std::vector<int64_t>{Dk, c.H, T}, q.data(), "q");
    const std::vector<float> want = run_cpu(g, g.flash_attn(qt, K, V, g.input_i32(c.positions, "pos"), scale));
    const std::vector<float> got = mla_decode_blocks(cache, q, c.H, Dv, c.positions, scale, c.splits);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 2e-5f)
          << ggl::type_name(c.type) << " H " << c.H << " splits " << c.splits << " at " << i;
  }
}

TEST(CudaHostMath, KeyByKeyWalkMatchesTheCpuAttention) {
  // The general kernel's walk (one key at a time per query row) for GQA prefill: 4 heads on 2 KV
  // heads, 6 tokens after 10 cached ones, separate K and V caches.
  const int64_t Dk = 64, Dv = 32, H = 4, Hkv = 2, G = H / Hkv, T = 6, N = 16;
  const float scale = 0.125f;
  const std::vector<int32_t> positions = {10, 11, 12, 13, 14, 15};
  for (Type t : {Type::F16, Type::Q8_0, Type::BF16}) {
    const Cache kc(t, Dk * Hkv, N, 31), vc(t, Dv * Hkv, N, 32);
    std::vector<float> q = random_floats(Dk * H * T, 33);
    Graph g;
    Tensor* kl = g.external(t, std::vector<int64_t>{Dk * Hkv, N}, kc.bytes.data(), "k");
    Tensor* vl = g.external(t, std::vector<int64_t>{Dv * Hkv, N}, vc.bytes.data(), "v");
    const size_t khead = ggl::row_bytes(t, Dk), vhead = ggl::row_bytes(t, Dv);
    Tensor* K = g.view(kl, {Dk, Hkv, N, 1}, {kl->nb[0], khead, kc.row, kc.row * N}, 0);
    Tensor* V = g.view(vl, {Dv, Hkv, N, 1}, {vl->nb[0], vhead, vc.row, vc.row * N}, 0);
    Tensor* qt = g.external(Type::F32, std::vector<int64_t>{Dk, H, T}, q.data(), "q");
    const std::vector<float> want = run_cpu(g, g.flash_attn(qt, K, V, g.input_i32(positions, "pos"), scale));
    for (int64_t t_ = 0; t_ < T; ++t_)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t hkv = h / G;
        cm::SoftmaxState s = cm::softmax_empty();
        std::vector<float> acc(Dv, 0.0f);
        for (int64_t j = 0; j < cm::visible_keys(positions[t_], N); ++j) {
          float p = 0.0f;
          for (int64_t i = 0; i < Dk; ++i)
            p += q[(t_ * H + h) * Dk + i] * cm::load_element(elem(t), kc.at(j) + hkv * khead, i);
          p *= scale;
          const float keep = cm::softmax_tile(s, &p, 1);
          for (int64_t e = 0; e < Dv; ++e)
            acc[e] = acc[e] * keep + p * cm::load_element(elem(t), vc.at(j) + hkv * vhead, e);
        }
        for (int64_t e = 0; e < Dv; ++e)
          ASSERT_NEAR(acc[e] * cm::softmax_inverse(s.l), want[(t_ * H + h) * Dv + e], 2e-5f)
              << ggl::type_name(t) << " token " << t_ << " head " << h << " at " << e;
      }
  }
}

TEST(CudaHostMath, SplitPlanCoversTheKeys) {
  for (int64_t n : {1, 15, 16, 17, 300, 4097})
    for (int splits : {1, 3, 8, 200}) {
      const int64_t per = cm::split_keys(n, splits, 16);
      EXPECT_EQ(per % 16, 0);
      EXPECT_GE(per * splits, n) << n << " keys, " << splits << " splits";
    }
  EXPECT_EQ(cm::visible_keys(-1, 10), 0);
  EXPECT_EQ(cm::visible_keys(3, 10), 4);
  EXPECT_EQ(cm::visible_keys(30, 10), 10);
}

}  // namespace test_cuda_host_math
