// DeepSeek-V2 / V2-Lite / V3 (DeepseekV2ForCausalLM, DeepseekV3ForCausalLM) → GGUF "deepseek2":
// Multi-head Latent Attention (optional q LoRA, compressed kv with a decoupled rotary key) and
// DeepSeekMoE (leading dense layers, then routed + shared experts).
//
// DeepSeek's rotary dims are stored with the rotary pairs interleaved (its modelling code
// de-interleaves them at run time), which is already the adjacent-pair order GGUF engines use:
// no row permutation is needed, unlike Llama.
#include <cmath>

#include "convert/model_plan.h"

namespace latte::convert {
namespace {

// The rope_scaling block: only YaRN (DeepSeek's long-context extension) is representable.
void add_rope_scaling(const JsonObject& cfg, const std::string& a, ggl::Metadata& md) {
  if (!cfg.has("rope_scaling")) {
    // Written as 0 even without YaRN (as the reference converter does): the multiplier then
    // leaves the attention scale unchanged.
    put_f32(md, a + ".rope.scaling.yarn_log_multiplier", 0.0);
    return;
  }
  JsonObject rs = cfg.get_object("rope_scaling");
  std::string type = rs.has("type") ? rs.get_string("type") : rs.opt_string("rope_type").value_or("");
  if (type != "yarn") ggl::fail("{}: rope type '{}' is not supported for DeepSeek (only yarn)", rs.source(), type);
  const double factor = rs.get_float("factor");
  const int64_t orig_ctx = rs.get_int("original_max_position_embeddings");
  const double mscale_all_dim = rs.float_or("mscale_all_dim", 0.0);
  // GGUF carries one mscale (yarn_log_multiplier = 0.1 * mscale_all_dim) and the YaRN ramp with
  // beta_fast 32 / beta_slow 1; other settings would silently change the model.
  if (rs.has("mscale") && std::fabs(rs.get_float("mscale") - mscale_all_dim) > 1e-6)
    ggl::fail("{}: mscale {} differs from mscale_all_dim {}, which GGUF cannot express", rs.source(),
              rs.get_float("mscale"), mscale_all_dim);
  if (rs.float_or("beta_fast", 32.0) != 32.0 || rs.float_or("beta_slow", 1.0) != 1.0)
    ggl::fail("{}: beta_fast/beta_slow other than 32/1 cannot be expressed in GGUF", rs.source());
  put_str(md, a + ".rope.scaling.type", "yarn");
  put_f32(md, a + ".rope.scaling.factor", factor);
  put_u32(md, a + ".rope.scaling.original_context_length", orig_ctx);
  put_f32(md, a + ".rope.scaling.yarn_log_multiplier", 0.1 * mscale_all_dim);
}

}  // namespace

ModelPlan plan_deepseek2(const JsonObject& cfg, const SafetensorsCheckpoint& ckpt, const PlanOptions& opts) {
  ModelPlan plan;
  plan.arch = "deepseek2";
  const std::string a = plan.arch;
  ggl::Metadata& md = plan.hparams;

  const int64_t n_vocab = positive_int(cfg, "vocab_size");
  const int64_t n_embd = positive_int(cfg, "hidden_size");
  const int64_t n_layer = positive_int(cfg, "num_hidden_layers");
  const int64_t n_head = positive_int(cfg, "num_attention_heads");
  const int64_t n_head_kv = cfg.int_or("num_key_value_heads", n_head);
  const int64_t n_ff = positive_int(cfg, "intermediate_size");
  const std::optional<int64_t> q_lora = cfg.opt_int("q_lora_rank");
  const int64_t kv_lora = positive_int(cfg, "kv_lora_rank");
  const int64_t nope = positive_int(cfg, "qk_nope_head_dim");
  const int64_t rope = positive_int(cfg, "qk_rope_head_dim");
  const int64_t v_dim = positive_int(cfg, "v_head_dim");
  const int64_t n_ctx = positive_int(cfg, "max_position_embeddings");
  const double eps = cfg.get_float("rms_norm_eps");
  const double theta = cfg.float_or("rope_theta", 10000.0);
  if (q_lora && *q_lora <= 0) ggl::fail("{}: key 'q_lora_rank' must be positive or null", cfg.source());
  if (rope % 2 != 0) ggl::fail("{}: qk_rope_head_dim {} is odd", cfg.source(), rope);

  // Mixture of experts. A config without n_routed_experts is a dense model.
  const bool moe = cfg.has("n_routed_experts");
  int64_t n_expert = 0, n_expert_used = 0, n_shared = 0, moe_ff = 0, n_dense = n_layer;
  int64_t n_group = 1, topk_group = 1;
  std::string scoring = "softmax";
  if (moe) {
    n_expert = positive_int(cfg, "n_routed_experts");
    n_expert_used = positive_int(cfg, "num_experts_per_tok");
    n_shared = cfg.get_int("n_shared_experts");
    moe_ff = positive_int(cfg, "moe_intermediate_size");
    n_dense = cfg.int_or("first_k_dense_replace", 0);
    scoring = cfg.opt_string("scoring_func").value_or("softmax");
    if (n_shared < 0) ggl::fail("{}: key 'n_shared_experts' must not be negative", cfg.source());
    if (n_expert_used > n_expert)
      ggl::fail("{}: num_experts_per_tok {} exceeds n_routed_experts {}", cfg.source(), n_expert_used, n_expert);
    if (n_dense < 0 || n_dense > n_layer)
      ggl::fail("{}: first_k_dense_replace {} is outside 0..{}", cfg.source(), n_dense, n_layer);
    if (cfg.int_or("moe_layer_freq", 1) != 1)
      ggl::fail("{}: moe_layer_freq {} is not supported (GGUF assumes every layer after the dense ones is MoE)",
                cfg.source(), cfg.get_int("moe_layer_freq"));
    if (scoring != "softmax" && scoring != "sigmoid")
      ggl::fail("{}: scoring_func '{}' is not supported (softmax or sigmoid)", cfg.source(), scoring);
    // Group-limited routing: V3 (noaux_tc) ranks groups by the sum of their two best biased
    // scores, which is what GGUF's expert_group_count / expert_group_used_count mean. V2's
    // group_limited_greedy ranks by the single best score and has no GGUF representation.
    n_group = cfg.int_or("n_group", 1);
    topk_group = cfg.int_or("topk_group", n_group);
    if (n_group > 1 && topk_group < n_group) {
      if (n_expert % n_group != 0 || topk_group <= 0)
        ggl::fail("{}: n_group {} / topk_group {} do not divide n_routed_experts {}", cfg.source(), n_group, topk_group,
                  n_expert);
      if (cfg.opt_string("topk_method").value_or("") != "noaux_tc") {
        plan.notices.push_back(fmt::format(
            "topk_method '{}' with n_group {} / topk_group {} has no GGUF form; experts are chosen over all groups",
            cfg.opt_string("topk_method").value_or(""), n_group, topk_group));
        n_group = topk_group = 1;
      }
    } else {
      n_group = topk_group = 1;
    }
  }
  // Routing weights: both versions normalise the top-k weights only when k > 1. V3 then always
  // multiplies by routed_scaling_factor; V2's modelling code multiplies only when it does not
  // normalise, so a normalising V2 model is stored with scale 1.
  const bool norm_topk = moe && n_expert_used > 1 && cfg.bool_or("norm_topk_prob", false);
  double expert_scale = cfg.float_or("routed_scaling_factor", 1.0);
  const bool is_v2 = cfg.raw()["architectures"][0] == "DeepseekV2ForCausalLM";
  if (is_v2 && norm_topk && expert_scale != 1.0) {
    plan.notices.push_back(fmt::format(
        "DeepSeek-V2 ignores routed_scaling_factor {} when norm_topk_prob is set: stored as 1", expert_scale));
    expert_scale = 1.0;
  }
  const bool split_kv_b = opts.mla_layout == MlaLayout::KbVb;

  // Hyperparameters, in the order other GGUF tools write them.
  put_u32(md, a + ".context_length", n_ctx);
  put_u32(md, a + ".embedding_length", n_embd);
  put_u32(md, a + ".block_count", n_layer);
  put_u32(md, a + ".feed_forward_length", n_ff);
  put_u32(md, a + ".attention.head_count", n_head);
  put_u32(md, a + ".attention.head_count_kv", split_kv_b ? 1 : n_head_kv);
  put_f32(md, a + ".attention.layer_norm_rms_epsilon", eps);
  put_f32(md, a + ".rope.freq_base", theta);
  if (moe) {
    put_u32(md, a + ".expert_used_count", n_expert_used);
    put_u32(md, a + ".leading_dense_block_count", n_dense);
  }
  if (q_lora) put_u32(md, a + ".attention.q_lora_rank", *q_lora);
  put_u32(md, a + ".attention.kv_lora_rank", kv_lora);
  if (split_kv_b) {
    // The latent cache is one "kv head" of kv_lora + rope values; the per-head sizes move to *_mla.
    put_u32(md, a + ".attention.key_length", kv_lora + rope);
    put_u32(md, a + ".attention.key_length_mla", nope + rope);
    put_u32(md, a + ".attention.value_length", kv_lora);
    put_u32(md, a + ".attention.value_length_mla", v_dim);
  } else {
    put_u32(md, a + ".attention.key_length", nope + rope);
    put_u32(md, a + ".attention.value_length", v_dim);
  }
  if (moe) {
    put_u32(md, a + ".expert_feed_forward_length", moe_ff);
    put_u32(md, a + ".expert_count", n_expert);
    put_u32(md, a + ".expert_shared_count", n_shared);
    put_f32(md, a + ".expert_weights_scale", expert_scale);
    put_bool(md, a + ".expert_weights_norm", norm_topk);
    put_u32(md, a + ".expert_gating_func", scoring == "softmax" ? 1 : 2);
    if (n_group > 1) {
      put_u32(md, a + ".expert_group_count", n_group);
      put_u32(md, a + ".expert_group_used_count", topk_group);
    }
  }
  put_u32(md, a + ".rope.dimension_count", rope);
  add_rope_scaling(cfg, a, md);
  plan.n_vocab = n_vocab;

  // Tensors.
  CheckpointTensors ck(ckpt);
  auto& out = plan.tensors;
  out.push_back(plan_copy("token_embd.weight", ck.take("model.embed_tokens.weight", {n_vocab, n_embd})));
  out.push_back(plan_copy("output_norm.weight", ck.take("model.norm.weight", {n_embd})));
  if (ck.has("lm_head.weight") || !cfg.bool_or("tie_word_embeddings", false))
    out.push_back(plan_copy("output.weight", ck.take("lm_head.weight", {n_vocab, n_embd})));

  for (int64_t il = 0; il < n_layer; ++il) {
    out.push_back(plan_layer_copy(ck, il, "attn_norm.weight", "input_layernorm.weight", {n_embd}));
    if (q_lora) {
      out.push_back(plan_layer_copy(ck, il, "attn_q_a.weight", "self_attn.q_a_proj.weight", {*q_lora, n_embd}));
      out.push_back(plan_layer_copy(ck, il, "attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight", {*q_lora}));
      out.push_back(
          plan_layer_copy(ck, il, "attn_q_b.weight", "self_attn.q_b_proj.weight", {n_head * (nope + rope), *q_lora}));
    } else {
      out.push_back(
          plan_layer_copy(ck, il, "attn_q.weight", "self_attn.q_proj.weight", {n_head * (nope + rope), n_embd}));
    }
    out.push_back(plan_layer_copy(ck, il, "attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight",
                                  {kv_lora + rope, n_embd}));
    out.push_back(plan_layer_copy(ck, il, "attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight", {kv_lora}));
    const StTensor& kv_b = ck.take(hf_layer_name(il, "self_attn.kv_b_proj.weight"), {n_head * (nope + v_dim), kv_lora});
    if (split_kv_b) {
      out.push_back(plan_kv_b_to_k_b(gguf_block_name(il, "attn_k_b.weight"), kv_b, n_head, nope, v_dim));
      out.push_back(plan_kv_b_to_v_b(gguf_block_name(il, "attn_v_b.weight"), kv_b, n_head, nope, v_dim));
    } else {
      out.push_back(plan_copy(gguf_block_name(il, "attn_kv_b.weight"), kv_b));
    }
    out.push_back(plan_layer_copy(ck, il, "attn_output.weight", "self_attn.o_proj.weight", {n_embd, n_head * v_dim}));
    out.push_back(plan_layer_copy(ck, il, "ffn_norm.weight", "post_attention_layernorm.weight", {n_embd}));

    if (!moe || il < n_dense) {
      plan_dense_ffn(ck, il, n_ff, n_embd, out);
      continue;
    }
    out.push_back(plan_layer_copy(ck, il, "ffn_gate_inp.weight", "mlp.gate.weight", {n_expert, n_embd}));
    // V3's aux-loss-free balancing adds a per-expert bias used only for choosing experts.
    const std::string bias = hf_layer_name(il, "mlp.gate.e_score_correction_bias");
    if (ck.has(bias) || cfg.opt_string("topk_method") == std::optional<std::string>("noaux_tc"))
      out.push_back(plan_copy(gguf_block_name(il, "exp_probs_b.bias"), ck.take(bias, {n_expert})));
    for (const char* proj : {"gate", "up", "down"}) {
      std::vector<const StTensor*> experts;
      const bool down = std::string(proj) == "down";
      for (int64_t e = 0; e < n_expert; ++e)
        experts.push_back(&ck.take(fmt::format("model.layers.{}.mlp.experts.{}.{}_proj.weight", il, e, proj),
                                   down ? std::vector<int64_t>{n_embd, moe_ff} : std::vector<int64_t>{moe_ff, n_embd}));
      out.push_back(plan_merge_experts(fmt::format("blk.{}.ffn_{}_exps.weight", il, proj), std::move(experts)));
    }
    if (n_shared > 0) {
      const int64_t sh_ff = moe_ff * n_shared;
      out.push_back(
          plan_layer_copy(ck, il, "ffn_gate_shexp.weight", "mlp.shared_experts.gate_proj.weight", {sh_ff, n_embd}));
      out.push_back(
          plan_layer_copy(ck, il, "ffn_up_shexp.weight", "mlp.shared_experts.up_proj.weight", {sh_ff, n_embd}));
      out.push_back(
          plan_layer_copy(ck, il, "ffn_down_shexp.weight", "mlp.shared_experts.down_proj.weight", {n_embd, sh_ff}));
    }
  }

  // Layers past num_hidden_layers are DeepSeek-V3's multi-token-prediction heads: not used for
  // ordinary decoding, so not converted. Precomputed rotary tables are not weights.
  int64_t skipped_mtp = 0;
  for (const StTensor* t : ckpt.all()) {
    long long idx = -1;
    int consumed = 0;
    if (std::sscanf(t->name.c_str(), "model.layers.%lld.%n", &idx, &consumed) == 1 && consumed > 0 && idx >= n_layer) {
      ck.skip(t->name);
      ++skipped_mtp;
    } else if (t->name.ends_with("rotary_emb.inv_freq")) {
      ck.skip(t->name);
    }
  }
  if (skipped_mtp > 0)
    plan.notices.push_back(
        fmt::format("skipped {} tensors of layers >= {} (multi-token-prediction heads)", skipped_mtp, n_layer));
  ck.check_all_used(a);
  return plan;
}

}  // namespace latte::convert
