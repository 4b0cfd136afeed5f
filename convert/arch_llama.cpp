// LlamaForCausalLM → GGUF "llama": RMSNorm, rotary attention with grouped-query heads, SwiGLU.
// Hugging Face stores q/k rows in rotate-half order; GGUF engines rotate adjacent pairs, so those
// two projections are permuted on the way (see plan_rope_permuted).
#include "convert/model_plan.h"

namespace latte::convert {

ModelPlan plan_llama(const JsonObject& cfg, const SafetensorsCheckpoint& ckpt, const PlanOptions&) {
  ModelPlan plan;
  plan.arch = "llama";
  const std::string a = plan.arch;
  ggl::Metadata& md = plan.hparams;

  const int64_t n_vocab = positive_int(cfg, "vocab_size");
  const int64_t n_embd = positive_int(cfg, "hidden_size");
  const int64_t n_layer = positive_int(cfg, "num_hidden_layers");
  const int64_t n_head = positive_int(cfg, "num_attention_heads");
  const int64_t n_head_kv = cfg.has("num_key_value_heads") ? positive_int(cfg, "num_key_value_heads") : n_head;
  const int64_t n_ff = positive_int(cfg, "intermediate_size");
  const int64_t n_ctx = positive_int(cfg, "max_position_embeddings");
  const double eps = cfg.get_float("rms_norm_eps");
  const double theta = cfg.float_or("rope_theta", 10000.0);
  const int64_t head_dim = cfg.has("head_dim") ? positive_int(cfg, "head_dim") : n_embd / n_head;
  const bool tied = cfg.bool_or("tie_word_embeddings", false);
  if (!cfg.has("head_dim") && n_embd % n_head != 0)
    ggl::fail("{}: hidden_size {} is not a multiple of num_attention_heads {}", cfg.source(), n_embd, n_head);
  if (n_head % n_head_kv != 0)
    ggl::fail("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", cfg.source(), n_head,
              n_head_kv);
  if (head_dim % 2 != 0) ggl::fail("{}: head size {} is odd; rotary pairs need an even size", cfg.source(), head_dim);
  if (cfg.bool_or("attention_bias", false) || cfg.bool_or("mlp_bias", false))
    ggl::fail("{}: attention_bias/mlp_bias are not supported", cfg.source());
  if (cfg.has("hidden_act") && cfg.get_string("hidden_act") != "silu")
    ggl::fail("{}: hidden_act '{}' is not supported (silu)", cfg.source(), cfg.get_string("hidden_act"));

  put_u32(md, a + ".context_length", n_ctx);
  put_u32(md, a + ".embedding_length", n_embd);
  put_u32(md, a + ".block_count", n_layer);
  put_u32(md, a + ".feed_forward_length", n_ff);
  put_u32(md, a + ".attention.head_count", n_head);
  put_u32(md, a + ".attention.head_count_kv", n_head_kv);
  put_f32(md, a + ".attention.layer_norm_rms_epsilon", eps);
  put_f32(md, a + ".rope.freq_base", theta);
  put_u32(md, a + ".rope.dimension_count", head_dim);
  if (head_dim * n_head != n_embd) {
    put_u32(md, a + ".attention.key_length", head_dim);
    put_u32(md, a + ".attention.value_length", head_dim);
  }
  if (cfg.has("rope_scaling")) {
    JsonObject rs = cfg.get_object("rope_scaling");
    std::string type = rs.has("type") ? rs.get_string("type") : rs.opt_string("rope_type").value_or("");
    if (type != "linear") ggl::fail("{}: rope type '{}' is not supported for llama (only linear)", rs.source(), type);
    put_str(md, a + ".rope.scaling.type", "linear");
    put_f32(md, a + ".rope.scaling.factor", rs.get_float("factor"));
  }
  plan.n_vocab = n_vocab;

  CheckpointTensors ck(ckpt);
  auto& out = plan.tensors;
  const int64_t q_rows = n_head * head_dim, kv_rows = n_head_kv * head_dim;
  out.push_back(plan_copy("token_embd.weight", ck.take("model.embed_tokens.weight", {n_vocab, n_embd})));
  out.push_back(plan_copy("output_norm.weight", ck.take("model.norm.weight", {n_embd})));
  // Tied embeddings: engines use token_embd for the output projection when output is absent.
  if (!tied)
    out.push_back(plan_copy("output.weight", ck.take("lm_head.weight", {n_vocab, n_embd})));
  else if (ck.has("lm_head.weight"))
    ck.skip("lm_head.weight");
  for (int64_t il = 0; il < n_layer; ++il) {
    out.push_back(plan_layer_copy(ck, il, "attn_norm.weight", "input_layernorm.weight", {n_embd}));
    out.push_back(plan_rope_permuted(gguf_block_name(il, "attn_q.weight"),
                                     ck.take(hf_layer_name(il, "self_attn.q_proj.weight"), {q_rows, n_embd}), n_head));
    out.push_back(plan_rope_permuted(gguf_block_name(il, "attn_k.weight"),
                                     ck.take(hf_layer_name(il, "self_attn.k_proj.weight"), {kv_rows, n_embd}),
                                     n_head_kv));
    out.push_back(plan_layer_copy(ck, il, "attn_v.weight", "self_attn.v_proj.weight", {kv_rows, n_embd}));
    out.push_back(plan_layer_copy(ck, il, "attn_output.weight", "self_attn.o_proj.weight", {n_embd, q_rows}));
    out.push_back(plan_layer_copy(ck, il, "ffn_norm.weight", "post_attention_layernorm.weight", {n_embd}));
    plan_dense_ffn(ck, il, n_ff, n_embd, out);
  }
  for (const StTensor* t : ckpt.all())
    if (t->name.ends_with("rotary_emb.inv_freq")) ck.skip(t->name);
  ck.check_all_used(a);
  return plan;
}

}  // namespace latte::convert
