#include "src/model/graph_blocks.h"

#include <array>
#include <span>

#include "ggml-like/core/error.h"

namespace latte {

ggl::Tensor* weight(ggl::Graph& g, WeightRef w) {
  return g.external(w->type, std::span<const int64_t>(w->ne, ggl::kMaxDims), w->data, w->name);
}

ggl::Tensor* norm(ggl::Graph& g, ggl::Tensor* x, WeightRef w, float eps) {
  return g.mul(g.rms_norm(x, eps), weight(g, w));
}

ggl::Tensor* swiglu_ffn(ggl::Graph& g, ggl::Tensor* x, WeightRef gate, WeightRef up, WeightRef down,
                        ggl::ActivationPrecision precision) {
  ggl::Tensor* act = g.swiglu(g.mul_mat(weight(g, gate), x, precision), g.mul_mat(weight(g, up), x, precision));
  return g.mul_mat(weight(g, down), act, precision);
}

namespace {

struct Routing {
  ggl::Tensor* logits;  // f32 [E, T]
  ggl::Tensor* probs;   // f32 [E, T]: the experts' weights are read from here
  ggl::Tensor* ids;     // i32 [k, T]: the chosen experts
};

Routing route(ggl::Graph& g, ggl::Tensor* x, const LayerWeights& l, const MoeConfig& moe) {
  Routing r;
  r.logits = g.mul_mat(weight(g, l.ffn_gate_inp), x);
  r.probs = moe.gating == ExpertGating::kSigmoid ? g.sigmoid(r.logits) : g.softmax(r.logits);
  // The selection bias only decides which experts run; their weights come from the plain scores.
  ggl::Tensor* selection = l.exp_probs_b ? g.add(r.probs, weight(g, l.exp_probs_b)) : r.probs;
  r.ids = g.top_k(selection, {static_cast<int>(moe.n_expert_used), static_cast<int>(moe.n_groups),
                              static_cast<int>(moe.n_groups_used)});
  return r;
}

}  // namespace

void prefetch_experts(ggl::Graph& g, const NextExperts& next, const MoeConfig& moe) {
  g.prefetch(weight(g, next.layer->ffn_gate_exps), route(g, next.x, *next.layer, moe).ids);
}

ggl::Tensor* moe_ffn(ggl::Graph& g, ggl::Tensor* x, const LayerWeights& l, const MoeConfig& moe,
                     const NextExperts* next, ggl::ExpertRange own, bool overlap, const GatheredTokens* gathered) {
  const int64_t E = moe.n_expert, k = moe.n_expert_used, D = l.ffn_down_exps->ne[1];
  const int64_t mine = x ? x->ne[1] : 0;
  if (!x && !gathered) ggl::fail("moe_ffn: no tokens");
  // Data parallelism: every process's tokens through the router and the routed experts.
  ggl::Tensor* all = gathered ? g.token_gather(x, D, gathered->first, gathered->total) : x;
  const int64_t T = all->ne[1];
  const Routing routing = route(g, all, l, moe);
  routing.logits->name = kMoeRouterLogits;
  ggl::Tensor* probs = routing.probs;
  ggl::Tensor* ids = routing.ids;  // [k, T]
  ids->name = kMoeChosenExperts;
  ggl::Tensor* w = g.get_rows(g.reshape(probs, {1, E, T, 1}), ids);  // [1, k, T]
  if (moe.weights_norm) {
    ggl::Tensor* w2 = g.reshape(w, {k, T, 1, 1});
    w = g.reshape(g.div(w2, g.sum_rows(w2)), {1, k, T, 1});
  }
  if (moe.weights_scale != 1.0f) w = g.scale(w, moe.weights_scale);

  ggl::Tensor* x3 = g.reshape(all, {D, 1, T, 1});
  ggl::Tensor* gate = g.mul_mat_id(weight(g, l.ffn_gate_exps), x3, ids, own);  // [F, k, T]
  if (next) prefetch_experts(g, *next, moe);  // after this layer's experts are in place
  ggl::Tensor* up = g.mul_mat_id(weight(g, l.ffn_up_exps), x3, ids, own);
  ggl::Tensor* down = g.mul_mat_id(weight(g, l.ffn_down_exps), g.swiglu(gate, up), ids, own);  // [D, k, T]
  // The shared experts take the routed experts' activation precision: 8-bit activations there kept
  // every fixture within its bounds, as they did not in the dense layers' FFN or the attention
  // (docs/cpu-kernels.md, "Which precision each product uses"). They run on this process's tokens.
  const auto shared_experts = [&] {
    return swiglu_ffn(g, x, l.ffn_gate_shexp, l.ffn_up_shexp, l.ffn_down_shexp, ggl::ActivationPrecision::kCoarse);
  };
  ggl::Tensor* shared = nullptr;
  if (!own.all(E)) {  // the other ranks' rows: sent, the shared experts computed while they travel, received
    const ggl::ExchangeRows what{.computed = own, .n_expert = E, .gathered = gathered != nullptr};
    ggl::Tensor* sent = overlap ? g.expert_send(down, ids, what) : nullptr;
    if (l.ffn_gate_shexp && x) shared = shared_experts();
    down = g.expert_exchange(down, ids, what, sent);
  }
  if (!x) return down;  // no tokens of this process's own: its experts served the others
  if (gathered) {       // this process's tokens' rows
    const size_t at = static_cast<size_t>(gathered->first);
    down = g.view(down, {D, k, mine, 1}, {down->nb[0], down->nb[1], down->nb[2], down->nb[2] * mine}, at * down->nb[2]);
    down->name = "own_rows";
    w = g.view(w, {1, k, mine, 1}, {w->nb[0], w->nb[1], w->nb[2], w->nb[2] * mine}, at * w->nb[2]);
  }
  ggl::Tensor* weighted = g.mul(down, w);

  // Sum over the k chosen experts.
  const size_t col = static_cast<size_t>(D) * sizeof(float);
  ggl::Tensor* out = nullptr;
  for (int64_t i = 0; i < k; ++i) {
    ggl::Tensor* slot =
        g.view(weighted, {D, mine, 1, 1}, {sizeof(float), col * k, col * k * mine, col * k * mine}, col * i);
    out = out ? g.add(out, slot) : slot;
  }
  if (l.ffn_gate_shexp) out = g.add(out, shared ? shared : shared_experts());
  return out;
}

ggl::RopeParams rope_frequencies(const Hparams& hp, int64_t n_rot) {
  ggl::RopeParams p;
  p.n_rot = static_cast<int>(n_rot);
  p.freq_base = hp.rope.freq_base;
  p.freq_scale = 1.0f / hp.rope.factor;
  if (hp.rope.scaling == RopeScaling::kYarn) {
    p.ext_factor = 1.0f;
    p.n_ctx_orig = static_cast<int>(hp.rope.original_context);
  }
  return p;
}

ggl::Tensor* part_columns(const ForwardContext& c, ggl::Tensor* t, const SequencePart& p, int dim) {
  if (p.first == 0 && p.n_tokens == c.n_tokens) return t;
  std::array<int64_t, 4> ne{t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
  ne[dim] = p.n_tokens;
  return c.g.view(t, ne, {t->nb[0], t->nb[1], t->nb[2], t->nb[3]}, static_cast<size_t>(p.first) * t->nb[dim]);
}

ggl::Tensor* join_parts(ggl::Graph& g, const std::vector<ggl::Tensor*>& results, int dim) {
  ggl::Tensor* out = results.front();
  for (size_t i = 1; i < results.size(); ++i) out = g.concat(out, results[i], dim);
  return out;
}

ggl::Tensor* output_logits(const ForwardContext& c, ggl::Tensor* x) {
  ggl::Graph& g = c.g;
  auto column = [&](int64_t t) {
    return g.view(x, {x->ne[0], 1, 1, 1}, {x->nb[0], x->nb[1], x->nb[1], x->nb[1]}, static_cast<size_t>(t) * x->nb[1]);
  };
  // Each sequence's last token (nothing to pick when every part is one token).
  if (!c.all_logits && c.n_tokens > static_cast<int64_t>(c.parts.size())) {
    std::vector<ggl::Tensor*> last;
    for (const SequencePart& p : c.parts) last.push_back(column(p.first + p.n_tokens - 1));
    x = join_parts(g, last, 1);
  }
  const ModelWeights& w = c.weights;
  ggl::Tensor* logits = g.mul_mat(weight(g, w.output), norm(g, x, w.output_norm, c.hp.rms_eps));
  g.mark_output(logits);
  return logits;
}

}  // namespace latte
