// Llama: RMSNorm, grouped-query attention with RoPE (adjacent pairs) over a K/V cache, SwiGLU.
#include <cmath>

#include "src/model/graph_blocks.h"

namespace latte {
namespace {

ggl::RopeParams llama_rope(const Hparams& hp) {
  ggl::RopeParams p = rope_frequencies(hp, hp.rope.n_rot);
  // YaRN's attention temperature, applied to the rotated values as in the paper.
  if (hp.rope.scaling == RopeScaling::kYarn) p.attn_factor = 1.0f + 0.1f * std::log(hp.rope.factor);
  return p;
}

ggl::Tensor* attention(const ForwardContext& c, int64_t il, ggl::Tensor* x) {
  ggl::Graph& g = c.g;
  const Hparams& hp = c.hp;
  const LayerWeights& l = c.weights.layers[il];
  const int64_t T = c.n_tokens, H = hp.n_head, Hkv = hp.n_head_kv, Dk = hp.head_dim_k, Dv = hp.head_dim_v;
  const ggl::RopeParams rope = llama_rope(hp);
  ggl::Tensor* freq = c.weights.rope_freqs ? weight(g, c.weights.rope_freqs) : nullptr;

  ggl::Tensor* q = g.rope(g.reshape(g.mul_mat(weight(g, l.wq), x), {Dk, H, T, 1}), c.positions, rope, freq);
  ggl::Tensor* k = g.rope(g.reshape(g.mul_mat(weight(g, l.wk), x), {Dk, Hkv, T, 1}), c.positions, rope, freq);
  ggl::Tensor* v = g.mul_mat(weight(g, l.wv), x);  // [Hkv * Dv, T]
  ggl::Tensor* k2 = g.reshape(k, {Hkv * Dk, T, 1, 1});

  // Per sequence: append its K and V rows at its positions n_past.., then attend over all its
  // visible rows.
  std::vector<ggl::Tensor*> outs;
  for (const SequencePart& s : c.parts) {
    const int64_t Ts = s.n_tokens, N = s.n_kv();
    ggl::Tensor* kc = s.cache->tensor(g, il, 0);
    ggl::Tensor* vc = s.cache->tensor(g, il, 1);
    const size_t krow = kc->nb[1], vrow = vc->nb[1];
    const size_t at = static_cast<size_t>(s.n_past);
    g.copy(part_columns(c, k2, s, 1),
           g.view(kc, {Hkv * Dk, Ts, 1, 1}, {kc->nb[0], krow, krow * Ts, krow * Ts}, at * krow));
    g.copy(part_columns(c, v, s, 1),
           g.view(vc, {Hkv * Dv, Ts, 1, 1}, {vc->nb[0], vrow, vrow * Ts, vrow * Ts}, at * vrow));
    const size_t khead = ggl::row_bytes(kc->type, Dk), vhead = ggl::row_bytes(vc->type, Dv);
    ggl::Tensor* K = g.view(kc, {Dk, Hkv, N, 1}, {kc->nb[0], khead, krow, krow * N}, 0);
    ggl::Tensor* V = g.view(vc, {Dv, Hkv, N, 1}, {vc->nb[0], vhead, vrow, vrow * N}, 0);
    ggl::Tensor* o = g.flash_attn(part_columns(c, q, s, 2), K, V, part_columns(c, c.positions, s, 0),
                                  1.0f / std::sqrt(static_cast<float>(Dk)));  // [Dv, H, Ts]
    outs.push_back(g.reshape(o, {Dv * H, Ts, 1, 1}));
  }
  return g.mul_mat(weight(g, l.wo), join_parts(g, outs, 1));
}

}  // namespace

ggl::Tensor* build_llama(const ForwardContext& c) {
  ggl::Graph& g = c.g;
  const ModelWeights& w = c.weights;
  ggl::Tensor* x = g.get_rows(weight(g, w.token_embd), c.tokens);
  for (int64_t il = 0; il < c.hp.n_layer; ++il) {
    const LayerWeights& l = w.layers[il];
    x = g.add(x, attention(c, il, norm(g, x, l.attn_norm, c.hp.rms_eps)));
    x = g.add(x, swiglu_ffn(g, norm(g, x, l.ffn_norm, c.hp.rms_eps), l.ffn_gate, l.ffn_up, l.ffn_down));
  }
  return output_logits(c, x);
}

}  // namespace latte
