#include "src/synth/synth_plan.h"

#include <fmt/format.h>

namespace latte::synth {
namespace {

using convert::MlaLayout;

class TensorList {
 public:
  // A weight matrix (or stack of them) whose rows are dotted with vectors of ne[0] values.
  void matrix(std::string name, std::vector<int64_t> ne) {
    const int64_t fan_in = ne[0];
    matrix(std::move(name), std::move(ne), fan_in);
  }
  void matrix(std::string name, std::vector<int64_t> ne, int64_t fan_in) {
    list_.push_back({std::move(name), std::move(ne), WeightInit::kMatrix, fan_in});
  }
  void norm(std::string name, int64_t n) { list_.push_back({std::move(name), {n}, WeightInit::kNorm, 1}); }
  void bias(std::string name, int64_t n) { list_.push_back({std::move(name), {n}, WeightInit::kBias, 1}); }
  std::vector<SynthTensor> take() { return std::move(list_); }

 private:
  std::vector<SynthTensor> list_;
};

std::string blk(int64_t il, const char* rest) { return fmt::format("blk.{}.{}", il, rest); }

void add_attention(const Geometry& g, MlaLayout layout, int64_t il, TensorList& t) {
  const int64_t E = g.n_embd, H = g.n_head, q_width = H * (g.qk_nope + g.qk_rope);
  if (g.q_lora_rank > 0) {
    t.matrix(blk(il, "attn_q_a.weight"), {E, g.q_lora_rank});
    t.norm(blk(il, "attn_q_a_norm.weight"), g.q_lora_rank);
    t.matrix(blk(il, "attn_q_b.weight"), {g.q_lora_rank, q_width});
  } else {
    t.matrix(blk(il, "attn_q.weight"), {E, q_width});
  }
  t.matrix(blk(il, "attn_kv_a_mqa.weight"), {E, g.kv_lora_rank + g.qk_rope});
  t.norm(blk(il, "attn_kv_a_norm.weight"), g.kv_lora_rank);
  if (layout == MlaLayout::KvB) {
    t.matrix(blk(il, "attn_kv_b.weight"), {g.kv_lora_rank, H * (g.qk_nope + g.v_head_dim)});
  } else {
    // The same projection split per head: k_b is stored transposed ([n_head][kv_lora][nope] in
    // numpy order), so its rows are short but it still maps the latent (kv_lora values).
    t.matrix(blk(il, "attn_k_b.weight"), {g.qk_nope, g.kv_lora_rank, H}, g.kv_lora_rank);
    t.matrix(blk(il, "attn_v_b.weight"), {g.kv_lora_rank, g.v_head_dim, H});
  }
  t.matrix(blk(il, "attn_output.weight"), {H * g.v_head_dim, E});
}

void add_ffn(const Geometry& g, int64_t il, TensorList& t) {
  const int64_t E = g.n_embd;
  t.norm(blk(il, "ffn_norm.weight"), E);
  if (il < g.n_leading_dense) {
    t.matrix(blk(il, "ffn_gate.weight"), {E, g.n_ff});
    t.matrix(blk(il, "ffn_up.weight"), {E, g.n_ff});
    t.matrix(blk(il, "ffn_down.weight"), {g.n_ff, E});
    return;
  }
  t.matrix(blk(il, "ffn_gate_inp.weight"), {E, g.n_expert});
  if (g.expert_bias) t.bias(blk(il, "exp_probs_b.bias"), g.n_expert);
  t.matrix(blk(il, "ffn_gate_exps.weight"), {E, g.n_ff_exp, g.n_expert});
  t.matrix(blk(il, "ffn_up_exps.weight"), {E, g.n_ff_exp, g.n_expert});
  t.matrix(blk(il, "ffn_down_exps.weight"), {g.n_ff_exp, E, g.n_expert});
  if (g.n_expert_shared > 0) {
    const int64_t F = g.n_ff_exp * g.n_expert_shared;
    t.matrix(blk(il, "ffn_gate_shexp.weight"), {E, F});
    t.matrix(blk(il, "ffn_up_shexp.weight"), {E, F});
    t.matrix(blk(il, "ffn_down_shexp.weight"), {F, E});
  }
}

}  // namespace

int64_t SynthTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

std::vector<SynthTensor> plan_tensors(const Geometry& g, MlaLayout layout) {
  TensorList t;
  t.matrix("token_embd.weight", {g.n_embd, g.n_vocab});
  t.norm("output_norm.weight", g.n_embd);
  t.matrix("output.weight", {g.n_embd, g.n_vocab});
  for (int64_t il = 0; il < g.n_layer; ++il) {
    t.norm(blk(il, "attn_norm.weight"), g.n_embd);
    add_attention(g, layout, il, t);
    add_ffn(g, il, t);
  }
  return t.take();
}

void add_hparams(const Geometry& g, MlaLayout layout, ggl::Metadata& md) {
  using convert::put_bool, convert::put_f32, convert::put_str, convert::put_u32;
  const std::string a = "deepseek2";
  const bool moe = g.n_leading_dense < g.n_layer;
  put_u32(md, a + ".context_length", g.n_ctx_train);
  put_u32(md, a + ".embedding_length", g.n_embd);
  put_u32(md, a + ".block_count", g.n_layer);
  put_u32(md, a + ".feed_forward_length", g.n_ff);
  put_u32(md, a + ".attention.head_count", g.n_head);
  // kv_b files state the per-head view (one KV head per head); k_b files the latent as one head.
  put_u32(md, a + ".attention.head_count_kv", layout == MlaLayout::KvB ? g.n_head : 1);
  put_f32(md, a + ".attention.layer_norm_rms_epsilon", g.rms_eps);
  put_f32(md, a + ".rope.freq_base", g.rope_base);
  // Always written (llama.cpp requires it for deepseek2): with every layer dense it equals
  // block_count, and no expert keys follow.
  put_u32(md, a + ".leading_dense_block_count", g.n_leading_dense);
  if (moe) put_u32(md, a + ".expert_used_count", g.n_expert_used);
  if (g.q_lora_rank > 0) put_u32(md, a + ".attention.q_lora_rank", g.q_lora_rank);
  put_u32(md, a + ".attention.kv_lora_rank", g.kv_lora_rank);
  if (layout == MlaLayout::KbVb) {
    put_u32(md, a + ".attention.key_length", g.kv_lora_rank + g.qk_rope);
    put_u32(md, a + ".attention.key_length_mla", g.qk_nope + g.qk_rope);
    put_u32(md, a + ".attention.value_length", g.kv_lora_rank);
    put_u32(md, a + ".attention.value_length_mla", g.v_head_dim);
  } else {
    put_u32(md, a + ".attention.key_length", g.qk_nope + g.qk_rope);
    put_u32(md, a + ".attention.value_length", g.v_head_dim);
  }
  if (moe) {
    put_u32(md, a + ".expert_feed_forward_length", g.n_ff_exp);
    put_u32(md, a + ".expert_count", g.n_expert);
    put_u32(md, a + ".expert_shared_count", g.n_expert_shared);
    put_f32(md, a + ".expert_weights_scale", g.weights_scale);
    put_bool(md, a + ".expert_weights_norm", g.weights_norm);
    put_u32(md, a + ".expert_gating_func", static_cast<int64_t>(g.gating));
    if (g.n_groups > 1) {
      put_u32(md, a + ".expert_group_count", g.n_groups);
      put_u32(md, a + ".expert_group_used_count", g.n_groups_used);
    }
  }
  put_u32(md, a + ".rope.dimension_count", g.qk_rope);
  if (g.yarn_factor > 1.0f) {
    put_str(md, a + ".rope.scaling.type", "yarn");
    put_f32(md, a + ".rope.scaling.factor", g.yarn_factor);
    put_u32(md, a + ".rope.scaling.original_context_length", g.yarn_original_ctx);
  }
  // GGUF's one YaRN attention-scale setting: 0.1 * mscale_all_dim (0 without YaRN).
  put_f32(md, a + ".rope.scaling.yarn_log_multiplier", 0.1 * g.yarn_mscale_all_dim);
  put_u32(md, a + ".vocab_size", g.n_vocab);
}

int64_t parameter_count(const std::vector<SynthTensor>& tensors) {
  int64_t n = 0;
  for (const SynthTensor& t : tensors) n += t.n_elements();
  return n;
}

}  // namespace latte::synth
