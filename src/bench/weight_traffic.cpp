#include "src/bench/weight_traffic.h"

#include <initializer_list>

#include "src/model/kv_cache.h"

namespace latte::bench {
namespace {

uint64_t bytes(WeightRef t) { return t ? t->nbytes : 0; }

uint64_t sum(std::initializer_list<WeightRef> ts) {
  uint64_t n = 0;
  for (WeightRef t : ts) n += bytes(t);
  return n;
}

// The slice of a stacked [.., .., n_expert] tensor that `used` experts occupy.
uint64_t used_experts(WeightRef t, int64_t used) {
  if (!t) return 0;
  return t->nbytes / static_cast<uint64_t>(t->ne[2]) * static_cast<uint64_t>(used);
}

}  // namespace

DecodeTraffic decode_weight_traffic(const Model& model) {
  const ModelWeights& w = model.weights();
  const Hparams& hp = model.hparams();
  DecodeTraffic d;
  for (const LayerWeights& l : w.layers) {
    d.attention += sum({l.attn_norm, l.wq, l.wk, l.wv, l.wq_a, l.wq_a_norm, l.wq_b, l.wkv_a_mqa, l.wkv_a_norm, l.wkv_b,
                        l.wk_b, l.wv_b, l.wo});
    d.dense_ffn += sum({l.ffn_norm, l.ffn_gate, l.ffn_up, l.ffn_down});
    d.router += sum({l.ffn_gate_inp, l.exp_probs_b});
    d.shared_experts += sum({l.ffn_gate_shexp, l.ffn_up_shexp, l.ffn_down_shexp});
    for (WeightRef t : {l.ffn_gate_exps, l.ffn_up_exps, l.ffn_down_exps})
      d.routed_experts += used_experts(t, hp.moe.n_expert_used);
  }
  d.attention += bytes(w.rope_freqs);
  d.output = sum({w.output_norm, w.output});
  if (w.output != w.token_embd) d.embedding_row = ggl::row_bytes(w.token_embd->type, w.token_embd->ne[0]);
  return d;
}

uint64_t cache_read_bytes(const Hparams& hp, ggl::Type t, int64_t n_ctx) {
  return static_cast<uint64_t>(cache_bytes_per_token(hp, t)) * static_cast<uint64_t>(n_ctx);
}

}  // namespace latte::bench
