// DeepSeek-V2/V3: multi-head latent attention over a cache of compressed latents, DeepSeekMoE.
//
// Per token and layer only [normalised latent c (kv_lora) ; rotated shared rope key (qk_rope)] is
// cached. Attention runs one of two ways (forward.h, MlaMode):
//   absorbed: q_abs = W_UK^T q_nope per head; scores = q_abs . c + q_pe . k_pe, i.e. MQA with one
//             KV head whose K row is the whole cached row and whose V row is its latent part;
//             out = W_O (W_UV (softmax-weighted sum of latents)).
//   naive:    k_nope = W_UK c, v = W_UV c for every visible token, then ordinary MHA with keys
//             [k_nope ; k_pe] and queries [q_nope ; q_pe].
// Both give the same result up to rounding (tests/src/model/test_forward_mla.cpp).
#include <array>
#include <cmath>
#include <optional>
#include <vector>

#include "src/model/graph_blocks.h"
#include "src/model/model.h"

namespace latte {
namespace {

struct MlaRope {
  ggl::RopeParams params;
  float kq_scale;
};

// YaRN as the reference engine applies it to DeepSeek: rotated values keep unit magnitude and
// the attention temperature goes into the softmax scale as mscale^2, with
// mscale = 1 + yarn_log_multiplier * ln(factor).
MlaRope mla_rope(const Hparams& hp) {
  MlaRope r;
  r.params = rope_frequencies(hp, hp.mla.qk_rope);
  const float mscale =
      hp.rope.scaling == RopeScaling::kYarn ? 1.0f + hp.rope.yarn_log_multiplier * std::log(hp.rope.factor) : 1.0f;
  r.kq_scale = mscale * mscale / std::sqrt(static_cast<float>(hp.mla.qk_nope + hp.mla.qk_rope));
  return r;
}

// Views of the per-head parts of attn_kv_b ([kv_lora, n_head * (nope + v)]): rows h*(nope+v) + j.
ggl::Tensor* kv_b_part(ggl::Graph& g, ggl::Tensor* kv_b, int64_t rows, int64_t first_row, const MlaConfig& m,
                       int64_t n_head) {
  const size_t row = kv_b->nb[1], head = row * static_cast<size_t>(m.qk_nope + m.v_head_dim);
  return g.view(kv_b, {m.kv_lora_rank, rows, n_head, 1}, {kv_b->nb[0], row, head, head * n_head}, first_row * row);
}

struct Projections {
  ggl::Tensor* q_nope;  // [nope, H, T] (view)
  ggl::Tensor* q_pe;    // [rope, H, T] rotated
};

Projections project_queries(const ForwardContext& c, const LayerWeights& l, ggl::Tensor* x, const MlaRope& rope) {
  ggl::Graph& g = c.g;
  const MlaConfig& m = c.hp.mla;
  const int64_t H = c.hp.n_head, T = c.n_tokens;
  ggl::Tensor* q =
      l.wq ? g.mul_mat(weight(g, l.wq), x)
           : g.mul_mat(weight(g, l.wq_b), norm(g, g.mul_mat(weight(g, l.wq_a), x), l.wq_a_norm, c.hp.rms_eps));
  ggl::Tensor* q3 = g.reshape(q, {m.qk_nope + m.qk_rope, H, T, 1});
  Projections p;
  p.q_nope = g.view(q3, {m.qk_nope, H, T, 1}, {q3->nb[0], q3->nb[1], q3->nb[2], q3->nb[3]}, 0);
  ggl::Tensor* pe =
      g.view(q3, {m.qk_rope, H, T, 1}, {q3->nb[0], q3->nb[1], q3->nb[2], q3->nb[3]}, m.qk_nope * sizeof(float));
  p.q_pe = g.rope(pe, c.positions, rope.params);
  return p;
}

struct Latents {
  ggl::Tensor* latent;  // [kv_lora, T] normalised
  ggl::Tensor* k_pe;    // [rope, 1, T] rotated
};

// The step's latents and rope keys.
Latents latents(const ForwardContext& c, const LayerWeights& l, ggl::Tensor* x, const MlaRope& rope) {
  ggl::Graph& g = c.g;
  const MlaConfig& m = c.hp.mla;
  const int64_t T = c.n_tokens;
  ggl::Tensor* kv = g.mul_mat(weight(g, l.wkv_a_mqa), x);  // [kv_lora + rope, T]
  const size_t kvrow = kv->nb[1];
  ggl::Tensor* latent = norm(g, g.view(kv, {m.kv_lora_rank, T, 1, 1}, {kv->nb[0], kvrow, kvrow * T, kvrow * T}, 0),
                             l.wkv_a_norm, c.hp.rms_eps);
  ggl::Tensor* k_pe =
      g.rope(g.view(kv, {m.qk_rope, 1, T, 1}, {kv->nb[0], kvrow, kvrow, kvrow * T}, m.kv_lora_rank * sizeof(float)),
             c.positions, rope.params);
  return {latent, k_pe};
}

// Writes a part's latents and rope keys into its cache rows n_past...
void write_latents(const ForwardContext& c, const SequencePart& s, const Latents& all, ggl::Tensor* cache) {
  ggl::Graph& g = c.g;
  const MlaConfig& m = c.hp.mla;
  const int64_t T = s.n_tokens;
  ggl::Tensor* latent = part_columns(c, all.latent, s, 1);
  ggl::Tensor* k_pe = part_columns(c, all.k_pe, s, 2);
  const size_t row = cache->nb[1], at = static_cast<size_t>(s.n_past) * row;
  const size_t pe_offset = ggl::row_bytes(cache->type, m.kv_lora_rank);
  g.copy(latent, g.view(cache, {m.kv_lora_rank, T, 1, 1}, {cache->nb[0], row, row * T, row * T}, at));
  g.copy(g.reshape(k_pe, {m.qk_rope, T, 1, 1}),
         g.view(cache, {m.qk_rope, T, 1, 1}, {cache->nb[0], row, row * T, row * T}, at + pe_offset));
}

// A part's absorbed attention: its queries already through W_UK^T (q_abs [L, T, H], q_pe
// [rope, H, T]) against its cached rows; returns the softmax-weighted latents [L, T, H], still to
// go through W_UV.
ggl::Tensor* attend_latents(const ForwardContext& c, const SequencePart& s, ggl::Tensor* q_abs, ggl::Tensor* q_pe,
                            ggl::Tensor* cache, const MlaRope& rope) {
  ggl::Graph& g = c.g;
  const MlaConfig& m = c.hp.mla;
  const int64_t L = m.kv_lora_rank, N = s.n_kv();
  ggl::Tensor* q = g.concat(g.permute(q_abs, 0, 2, 1, 3), q_pe, 0);  // [L + rope, H, T]
  const size_t row = cache->nb[1];
  ggl::Tensor* K = g.view(cache, {L + m.qk_rope, 1, N, 1}, {cache->nb[0], row, row, row * N}, 0);
  ggl::Tensor* V = g.view(cache, {L, 1, N, 1}, {cache->nb[0], row, row, row * N}, 0);
  ggl::Tensor* o = g.flash_attn(q, K, V, part_columns(c, c.positions, s, 0), rope.kq_scale);  // [L, H, T]
  return g.permute(o, 0, 2, 1, 3);                                                            // [L, T, H]
}

// Columns [first, first + n) of dimension dim.
ggl::Tensor* slice(ggl::Graph& g, ggl::Tensor* t, int64_t first, int64_t n, int dim) {
  if (first == 0 && n == t->ne[dim]) return t;
  std::array<int64_t, 4> ne{t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
  ne[dim] = n;
  return g.view(t, ne, {t->nb[0], t->nb[1], t->nb[2], t->nb[3]}, static_cast<size_t>(first) * t->nb[dim]);
}

// The absorbed parts' tokens of a step tensor, one after the other along dimension dim.
ggl::Tensor* gather_parts(const ForwardContext& c, ggl::Tensor* t, const std::vector<const SequencePart*>& parts,
                          int dim) {
  if (parts.size() == c.parts.size()) return t;  // all of them: every token, in order
  std::vector<ggl::Tensor*> pieces;
  for (const SequencePart* s : parts) pieces.push_back(part_columns(c, t, *s, dim));
  return join_parts(c.g, pieces, dim);
}

// The absorbed parts' attention, [v * H, tokens of those parts]. Their two weight products (W_UK^T
// on the queries, W_UV on the attended latents) take all their tokens at once: a decode step of
// many sequences reads those weights once, not once per sequence.
ggl::Tensor* attend_absorbed(const ForwardContext& c, const std::vector<const SequencePart*>& parts,
                             const std::vector<ggl::Tensor*>& caches, const LayerWeights& l, const Projections& p,
                             const MlaRope& rope) {
  ggl::Graph& g = c.g;
  const MlaConfig& m = c.hp.mla;
  const int64_t H = c.hp.n_head;
  ggl::Tensor* q_nope = g.permute(gather_parts(c, p.q_nope, parts, 2), 0, 2, 1, 3);  // [nope, T, H]
  ggl::Tensor* q_abs = l.wk_b ? g.mul_mat(weight(g, l.wk_b), q_nope)                 // [L, T, H]
                              : g.mul_mat_t(kv_b_part(g, weight(g, l.wkv_b), m.qk_nope, 0, m, H), q_nope);
  ggl::Tensor* q_pe = gather_parts(c, p.q_pe, parts, 2);  // [rope, H, T]
  std::vector<ggl::Tensor*> latents;
  int64_t at = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int64_t n = parts[i]->n_tokens;
    latents.push_back(
        attend_latents(c, *parts[i], slice(g, q_abs, at, n, 1), slice(g, q_pe, at, n, 2), caches[i], rope));
    at += n;
  }
  ggl::Tensor* o_heads = join_parts(g, latents, 1);                // [L, T, H]
  ggl::Tensor* v = l.wv_b ? g.mul_mat(weight(g, l.wv_b), o_heads)  // [v, T, H]
                          : g.mul_mat(kv_b_part(g, weight(g, l.wkv_b), m.v_head_dim, m.qk_nope, m, H), o_heads);
  return g.reshape(g.cont(g.permute(v, 0, 2, 1, 3)), {m.v_head_dim * H, at, 1, 1});
}

ggl::Tensor* attend_naive(const ForwardContext& c, const SequencePart& s, const LayerWeights& l, const Projections& p,
                          ggl::Tensor* cache, const MlaRope& rope) {
  ggl::Graph& g = c.g;
  const MlaConfig& m = c.hp.mla;
  const int64_t H = c.hp.n_head, T = s.n_tokens, N = s.n_kv(), L = m.kv_lora_rank;
  const size_t row = cache->nb[1];
  ggl::Tensor* latents = g.cont(g.view(cache, {L, N, 1, 1}, {cache->nb[0], row, row * N, row * N}, 0));  // [L, N]
  ggl::Tensor* k_pe = g.cont(g.view(cache, {m.qk_rope, 1, N, 1}, {cache->nb[0], row, row, row * N},
                                    ggl::row_bytes(cache->type, L)));  // [rope, 1, N]
  ggl::Tensor* k_nope;                                                 // [nope, H, N]
  ggl::Tensor* v;                                                      // [v, H, N]
  if (l.wkv_b) {
    ggl::Tensor* kv = g.reshape(g.mul_mat(weight(g, l.wkv_b), latents), {m.qk_nope + m.v_head_dim, H, N, 1});
    k_nope = g.view(kv, {m.qk_nope, H, N, 1}, {kv->nb[0], kv->nb[1], kv->nb[2], kv->nb[3]}, 0);
    v = g.view(kv, {m.v_head_dim, H, N, 1}, {kv->nb[0], kv->nb[1], kv->nb[2], kv->nb[3]}, m.qk_nope * sizeof(float));
  } else {
    k_nope = g.permute(g.mul_mat_t(weight(g, l.wk_b), latents), 0, 2, 1, 3);  // [nope, N, H] -> [nope, H, N]
    v = g.permute(g.mul_mat(weight(g, l.wv_b), latents), 0, 2, 1, 3);         // [v, N, H] -> [v, H, N]
  }
  ggl::Tensor* K = g.concat(k_nope, k_pe, 0);  // [nope + rope, H, N], k_pe shared by all heads
  ggl::Tensor* q = g.concat(part_columns(c, p.q_nope, s, 2), part_columns(c, p.q_pe, s, 2), 0);  // [nope + rope, H, T]
  ggl::Tensor* o = g.flash_attn(q, K, v, part_columns(c, c.positions, s, 0), rope.kq_scale);     // [v, H, T]
  return g.reshape(o, {m.v_head_dim * H, T, 1, 1});
}

}  // namespace

ggl::Tensor* build_deepseek2(const ForwardContext& c) {
  ggl::Graph& g = c.g;
  const Hparams& hp = c.hp;
  const ModelWeights& w = c.weights;
  const MlaRope rope = mla_rope(hp);
  // Routed experts read from the file as they are needed: pre-gate them.
  const bool paged = c.model.expert_pager() && !c.model.expert_pager()->preloaded();

  ggl::Tensor* x = g.get_rows(weight(g, w.token_embd), c.tokens);
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const LayerWeights& l = w.layers[il];
    ggl::Tensor* h = norm(g, x, l.attn_norm, hp.rms_eps);
    const Projections p = project_queries(c, l, h, rope);
    const Latents step_latents = latents(c, l, h, rope);
    // Attention per sequence, over its own cache, each part by its own path; the absorbed parts
    // share their weight products.
    std::vector<const SequencePart*> absorbed;
    std::vector<ggl::Tensor*> caches, absorbed_caches;
    for (const SequencePart& s : c.parts) {
      caches.push_back(s.cache->tensor(g, il, 0));
      write_latents(c, s, step_latents, caches.back());
      if (s.mla_path == MlaMode::kNaive) continue;
      absorbed.push_back(&s);
      absorbed_caches.push_back(caches.back());
    }
    ggl::Tensor* attn = absorbed.empty() ? nullptr : attend_absorbed(c, absorbed, absorbed_caches, l, p, rope);
    if (absorbed.size() < c.parts.size()) {  // naive parts too: every part's rows in step order
      std::vector<ggl::Tensor*> rows;
      int64_t at = 0;
      for (size_t i = 0; i < c.parts.size(); ++i) {
        const SequencePart& s = c.parts[i];
        if (s.mla_path == MlaMode::kNaive) {
          rows.push_back(attend_naive(c, s, l, p, caches[i], rope));
        } else {
          rows.push_back(slice(g, attn, at, s.n_tokens, 1));
          at += s.n_tokens;
        }
      }
      attn = join_parts(g, rows, 1);
    }
    x = g.add(x, g.mul_mat(weight(g, l.wo), attn));

    ggl::Tensor* normed = g.rms_norm(x, hp.rms_eps);
    h = g.mul(normed, weight(g, l.ffn_norm));  // norm(), its rms_norm shared with the guess below
    std::optional<NextExperts> next;
    if (paged && il + 1 < hp.n_layer && w.layers[il + 1].is_moe())
      next = NextExperts{g.mul(normed, weight(g, w.layers[il + 1].ffn_norm)), &w.layers[il + 1]};
    if (next && !l.is_moe()) prefetch_experts(g, *next, hp.moe);
    ggl::Tensor* ffn = l.is_moe() ? moe_ffn(g, h, l, hp.moe, next ? &*next : nullptr, c.model.own_experts(il),
                                            c.model.expert_share().overlap, c.gathered)
                                  : swiglu_ffn(g, h, l.ffn_gate, l.ffn_up, l.ffn_down);
    x = g.add(x, ffn);
  }
  return output_logits(c, x);
}

}  // namespace latte
