#include "src/model/hparams.h"

#include <string>

#include "ggml-like/core/error.h"

namespace latte {
namespace {

// Metadata access with the architecture prefix and the file name in every message.
class Keys {
 public:
  Keys(const ggl::GgufFile& file, std::string arch) : file_(file), md_(file.metadata()), arch_(std::move(arch)) {}

  std::string key(std::string_view k) const { return arch_ + "." + std::string(k); }
  bool has(std::string_view k) const { return md_.has(key(k)); }
  int64_t integer(std::string_view k) const { return md_.get<int64_t>(key(k)); }
  int64_t integer_or(std::string_view k, int64_t fallback) const { return md_.get_or<int64_t>(key(k), fallback); }
  float real_or(std::string_view k, float fallback) const { return md_.get_or<float>(key(k), fallback); }
  bool flag_or(std::string_view k, bool fallback) const { return md_.get_or<bool>(key(k), fallback); }
  std::string text_or(std::string_view k, std::string fallback) const {
    return md_.get_or<std::string>(key(k), std::move(fallback));
  }

  // A positive value, or an error naming the key.
  int64_t positive(std::string_view k, int64_t v) const {
    if (v <= 0) ggl::fail("{}: {} = {} must be positive", file_.path(), key(k), v);
    return v;
  }

  [[noreturn]] void bad(std::string_view what) const { ggl::fail("{}: {}", file_.path(), what); }

 private:
  const ggl::GgufFile& file_;
  const ggl::Metadata& md_;
  std::string arch_;
};

void read_rope_scaling(const Keys& k, Hparams& hp) {
  RopeConfig& r = hp.rope;
  const std::string type = k.text_or("rope.scaling.type", "none");
  if (type == "yarn") {
    r.scaling = RopeScaling::kYarn;
  } else if (type == "linear") {
    r.scaling = RopeScaling::kLinear;
  } else if (type != "none") {
    k.bad("unsupported " + k.key("rope.scaling.type") + " '" + type + "' (supported: none, linear, yarn)");
  }
  if (r.scaling != RopeScaling::kNone) r.factor = k.real_or("rope.scaling.factor", 1.0f);
  if (r.scaling == RopeScaling::kNone && k.has("rope.scale_linear")) {  // older llama files
    r.scaling = RopeScaling::kLinear;
    r.factor = k.real_or("rope.scale_linear", 1.0f);
  }
  if (!(r.factor >= 1.0f)) k.bad(k.key("rope.scaling.factor") + " must be at least 1");
  r.original_context = k.integer_or("rope.scaling.original_context_length", hp.n_ctx_train);
  r.yarn_log_multiplier = k.real_or("rope.scaling.yarn_log_multiplier", 0.0f);
  if (r.scaling == RopeScaling::kYarn && r.original_context <= 0)
    k.bad(k.key("rope.scaling.original_context_length") + " is required for YaRN");
}

void read_llama(const Keys& k, Hparams& hp) {
  hp.n_ff = k.positive("feed_forward_length", k.integer("feed_forward_length"));
  if (hp.n_head % hp.n_head_kv != 0)
    k.bad(k.key("attention.head_count") + " (" + std::to_string(hp.n_head) + ") is not a multiple of " +
          k.key("attention.head_count_kv") + " (" + std::to_string(hp.n_head_kv) + ")");
  hp.head_dim_k = k.positive("attention.key_length", k.integer_or("attention.key_length", hp.n_embd / hp.n_head));
  hp.head_dim_v = k.positive("attention.value_length", k.integer_or("attention.value_length", hp.head_dim_k));
  hp.rope.n_rot = k.integer_or("rope.dimension_count", hp.head_dim_k);
  if (hp.rope.n_rot <= 0 || hp.rope.n_rot % 2 != 0 || hp.rope.n_rot > hp.head_dim_k)
    k.bad(k.key("rope.dimension_count") + " must be even and at most the head size " + std::to_string(hp.head_dim_k));
}

void read_deepseek2(const ggl::GgufFile& file, const Keys& k, Hparams& hp) {
  MlaConfig& m = hp.mla;
  // Whether queries go through a low-rank projection is decided by the tensors (V2-Lite has none).
  const ggl::TensorInfo* q_a = file.find_tensor("blk.0.attn_q_a.weight");
  m.q_lora_rank = q_a ? k.integer_or("attention.q_lora_rank", q_a->ne[1]) : 0;
  m.kv_lora_rank = k.positive("attention.kv_lora_rank", k.integer("attention.kv_lora_rank"));
  m.qk_rope = k.positive("rope.dimension_count", k.integer("rope.dimension_count"));
  // Current converters store the absorbed (MQA) view in key_length/value_length and the per-head
  // sizes in the *_mla keys; older files store the per-head sizes directly.
  const bool mla_keys = k.has("attention.key_length_mla");
  const char* key_k = mla_keys ? "attention.key_length_mla" : "attention.key_length";
  const char* key_v = mla_keys ? "attention.value_length_mla" : "attention.value_length";
  hp.head_dim_k = k.positive(key_k, k.integer(key_k));
  hp.head_dim_v = k.positive(key_v, k.integer(key_v));
  m.qk_nope = hp.head_dim_k - m.qk_rope;
  m.v_head_dim = hp.head_dim_v;
  if (m.qk_nope <= 0 || m.qk_rope % 2 != 0)
    k.bad(k.key(key_k) + " (" + std::to_string(hp.head_dim_k) + ") must exceed the even " +
          k.key("rope.dimension_count") + " (" + std::to_string(m.qk_rope) + ")");
  hp.rope.n_rot = m.qk_rope;
  hp.n_ff = k.integer_or("feed_forward_length", 0);

  MoeConfig& e = hp.moe;
  e.n_leading_dense = k.integer_or("leading_dense_block_count", 0);
  e.n_expert = k.integer_or("expert_count", 0);
  // A file without experts (no expert_count, or 0) has only dense layers, whatever
  // leading_dense_block_count says (a model cut to its first, dense, layers).
  if (e.n_expert == 0) e.n_leading_dense = hp.n_layer;
  if (e.n_leading_dense < 0 || e.n_leading_dense > hp.n_layer)
    k.bad(k.key("leading_dense_block_count") + " is outside the layer count");
  if (e.n_leading_dense > 0 && hp.n_ff <= 0) k.bad(k.key("feed_forward_length") + " is required for dense layers");
  if (e.n_leading_dense < hp.n_layer) {  // there are MoE layers
    e.n_expert = k.positive("expert_count", e.n_expert);
    e.n_expert_used = k.positive("expert_used_count", k.integer("expert_used_count"));
    e.n_expert_shared = k.integer_or("expert_shared_count", 0);
    e.n_ff_exp = k.positive("expert_feed_forward_length", k.integer("expert_feed_forward_length"));
    e.weights_scale = k.real_or("expert_weights_scale", 1.0f);
    e.weights_norm = k.flag_or("expert_weights_norm", false);
    const int64_t gating = k.integer_or("expert_gating_func", 1);  // older V2 files: softmax
    if (gating != 1 && gating != 2) k.bad(k.key("expert_gating_func") + " must be 1 (softmax) or 2 (sigmoid)");
    e.gating = static_cast<ExpertGating>(gating);
    e.n_groups = k.integer_or("expert_group_count", 1);
    e.n_groups_used = k.integer_or("expert_group_used_count", e.n_groups);
    if (e.n_groups < 1 || e.n_expert % e.n_groups != 0 || e.n_groups_used < 1 || e.n_groups_used > e.n_groups)
      k.bad(k.key("expert_group_count") + "/" + k.key("expert_group_used_count") + " do not divide the experts");
    if (e.n_expert_used > e.n_expert / e.n_groups * e.n_groups_used)
      k.bad(k.key("expert_used_count") + " exceeds the experts available");
    if (e.n_expert_shared < 0) k.bad(k.key("expert_shared_count") + " is negative");
  }
}

}  // namespace

std::string_view arch_name(Arch arch) { return arch == Arch::kLlama ? "llama" : "deepseek2"; }

Hparams read_hparams(const ggl::GgufFile& file) {
  const ggl::Metadata& md = file.metadata();
  Hparams hp;
  hp.arch_name = md.get<std::string>("general.architecture");
  if (hp.arch_name == "llama") {
    hp.arch = Arch::kLlama;
  } else if (hp.arch_name == "deepseek2") {
    hp.arch = Arch::kDeepseek2;
  } else if (hp.arch_name == "deepseek32") {
    ggl::fail("{}: DeepSeek-V3.2 (architecture 'deepseek32', sparse attention) is not supported yet", file.path());
  } else {
    ggl::fail("{}: unsupported architecture '{}' (supported: llama, deepseek2)", file.path(), hp.arch_name);
  }
  const Keys k(file, hp.arch_name);
  hp.n_embd = k.positive("embedding_length", k.integer("embedding_length"));
  hp.n_layer = k.positive("block_count", k.integer("block_count"));
  hp.n_head = k.positive("attention.head_count", k.integer("attention.head_count"));
  hp.n_head_kv = k.positive("attention.head_count_kv", k.integer_or("attention.head_count_kv", hp.n_head));
  hp.n_ctx_train = k.positive("context_length", k.integer("context_length"));
  hp.rms_eps = k.real_or("attention.layer_norm_rms_epsilon", 1e-5f);
  hp.rope.freq_base = k.real_or("rope.freq_base", 10000.0f);
  if (!(hp.rope.freq_base > 1.0f)) k.bad(k.key("rope.freq_base") + " must exceed 1");

  // Vocabulary: the declared size, else the embedding table's rows.
  const ggl::TensorInfo* embd = file.find_tensor("token_embd.weight");
  hp.n_vocab = k.integer_or("vocab_size", embd ? embd->ne[1] : 0);
  if (hp.n_vocab <= 0) k.bad("cannot tell the vocabulary size (no " + k.key("vocab_size") + ", no token_embd.weight)");

  read_rope_scaling(k, hp);
  if (hp.arch == Arch::kLlama)
    read_llama(k, hp);
  else
    read_deepseek2(file, k, hp);
  return hp;
}

}  // namespace latte
