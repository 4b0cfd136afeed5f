#include "src/model/weights.h"

#include <fmt/format.h>

#include <initializer_list>
#include <string>

#include "ggml-like/core/error.h"
#include "ggml-like/quant/quant.h"

namespace latte {
namespace {

std::string shape(std::initializer_list<int64_t> ne) { return fmt::format("[{}]", fmt::join(ne, ", ")); }
std::string shape(const ggl::TensorInfo& t) {
  return fmt::format("[{}]", fmt::join(t.ne, t.ne + std::max(t.n_dims, 1), ", "));
}

class Loader {
 public:
  explicit Loader(const ggl::GgufFile& file) : file_(file) {}

  WeightRef optional(const std::string& name, std::initializer_list<int64_t> ne) const {
    const ggl::TensorInfo* t = file_.find_tensor(name);
    if (!t) return nullptr;
    bool ok = static_cast<int>(ne.size()) >= t->n_dims;
    int d = 0;
    for (int64_t n : ne) ok = ok && t->ne[d++] == n;
    for (; d < ggl::kMaxDims; ++d) ok = ok && t->ne[d] == 1;
    if (!ok) ggl::fail("{}: tensor '{}' has shape {}, expected {}", file_.path(), name, shape(*t), shape(ne));
    if (!ggl::is_weight_type(t->type))
      ggl::fail("{}: tensor '{}' has element type {}, which latte cannot compute with", file_.path(), name,
                ggl::type_name(t->type));
    // Vectors are multiplied element-wise with f32 activations.
    if (ne.size() == 1 && t->type != ggl::Type::F32)
      ggl::fail("{}: tensor '{}' is {}, expected f32", file_.path(), name, ggl::type_name(t->type));
    return t;
  }

  WeightRef required(const std::string& name, std::initializer_list<int64_t> ne) const {
    WeightRef t = optional(name, ne);
    if (!t) ggl::fail("{}: missing tensor '{}' (expected shape {})", file_.path(), name, shape(ne));
    return t;
  }

  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }
  const ggl::GgufFile& file() const { return file_; }

 private:
  const ggl::GgufFile& file_;
};

std::string blk(int64_t il, const char* name) { return fmt::format("blk.{}.{}.weight", il, name); }

void load_ffn(const Loader& ld, const Hparams& hp, int64_t il, LayerWeights& l) {
  const int64_t E = hp.n_embd;
  l.ffn_norm = ld.required(blk(il, "ffn_norm"), {E});
  const bool moe = hp.arch == Arch::kDeepseek2 && il >= hp.moe.n_leading_dense;
  if (!moe) {
    l.ffn_gate = ld.required(blk(il, "ffn_gate"), {E, hp.n_ff});
    l.ffn_up = ld.required(blk(il, "ffn_up"), {E, hp.n_ff});
    l.ffn_down = ld.required(blk(il, "ffn_down"), {hp.n_ff, E});
    return;
  }
  const MoeConfig& m = hp.moe;
  l.ffn_gate_inp = ld.required(blk(il, "ffn_gate_inp"), {E, m.n_expert});
  l.exp_probs_b = ld.optional(fmt::format("blk.{}.exp_probs_b.bias", il), {m.n_expert});
  l.ffn_gate_exps = ld.required(blk(il, "ffn_gate_exps"), {E, m.n_ff_exp, m.n_expert});
  l.ffn_up_exps = ld.required(blk(il, "ffn_up_exps"), {E, m.n_ff_exp, m.n_expert});
  l.ffn_down_exps = ld.required(blk(il, "ffn_down_exps"), {m.n_ff_exp, E, m.n_expert});
  if (m.n_expert_shared > 0) {
    const int64_t F = m.n_ff_exp * m.n_expert_shared;
    l.ffn_gate_shexp = ld.required(blk(il, "ffn_gate_shexp"), {E, F});
    l.ffn_up_shexp = ld.required(blk(il, "ffn_up_shexp"), {E, F});
    l.ffn_down_shexp = ld.required(blk(il, "ffn_down_shexp"), {F, E});
  }
}

void load_llama_attention(const Loader& ld, const Hparams& hp, int64_t il, LayerWeights& l) {
  l.wq = ld.required(blk(il, "attn_q"), {hp.n_embd, hp.n_head * hp.head_dim_k});
  l.wk = ld.required(blk(il, "attn_k"), {hp.n_embd, hp.n_head_kv * hp.head_dim_k});
  l.wv = ld.required(blk(il, "attn_v"), {hp.n_embd, hp.n_head_kv * hp.head_dim_v});
  l.wo = ld.required(blk(il, "attn_output"), {hp.n_head * hp.head_dim_v, hp.n_embd});
}

void load_mla_attention(const Loader& ld, const Hparams& hp, int64_t il, LayerWeights& l) {
  const MlaConfig& m = hp.mla;
  const int64_t H = hp.n_head, q_width = H * (m.qk_nope + m.qk_rope);
  // With or without a q low-rank projection: decided by which tensors exist.
  if (ld.has(blk(il, "attn_q_a"))) {
    const ggl::TensorInfo* qa = ld.file().find_tensor(blk(il, "attn_q_a"));
    const int64_t rank = m.q_lora_rank > 0 ? m.q_lora_rank : qa->ne[1];
    l.wq_a = ld.required(blk(il, "attn_q_a"), {hp.n_embd, rank});
    l.wq_a_norm = ld.required(blk(il, "attn_q_a_norm"), {rank});
    l.wq_b = ld.required(blk(il, "attn_q_b"), {rank, q_width});
  } else {
    l.wq = ld.required(blk(il, "attn_q"), {hp.n_embd, q_width});
  }
  l.wkv_a_mqa = ld.required(blk(il, "attn_kv_a_mqa"), {hp.n_embd, m.kv_lora_rank + m.qk_rope});
  l.wkv_a_norm = ld.required(blk(il, "attn_kv_a_norm"), {m.kv_lora_rank});
  // Older files: one attn_kv_b; current converters: attn_k_b and attn_v_b.
  if (ld.has(blk(il, "attn_k_b")) || !ld.has(blk(il, "attn_kv_b"))) {
    l.wk_b = ld.required(blk(il, "attn_k_b"), {m.qk_nope, m.kv_lora_rank, H});
    l.wv_b = ld.required(blk(il, "attn_v_b"), {m.kv_lora_rank, m.v_head_dim, H});
  } else {
    l.wkv_b = ld.required(blk(il, "attn_kv_b"), {m.kv_lora_rank, H * (m.qk_nope + m.v_head_dim)});
  }
  l.wo = ld.required(blk(il, "attn_output"), {H * m.v_head_dim, hp.n_embd});
}

}  // namespace

ModelWeights load_weights(const ggl::GgufFile& file, const Hparams& hp) {
  const Loader ld(file);
  ModelWeights w;
  w.token_embd = ld.required("token_embd.weight", {hp.n_embd, hp.n_vocab});
  w.output_norm = ld.required("output_norm.weight", {hp.n_embd});
  w.output = ld.optional("output.weight", {hp.n_embd, hp.n_vocab});
  if (!w.output) w.output = w.token_embd;  // tied embeddings
  if (hp.arch == Arch::kLlama) w.rope_freqs = ld.optional("rope_freqs.weight", {hp.rope.n_rot / 2});
  w.layers.resize(hp.n_layer);
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    LayerWeights& l = w.layers[il];
    l.attn_norm = ld.required(blk(il, "attn_norm"), {hp.n_embd});
    if (hp.arch == Arch::kLlama)
      load_llama_attention(ld, hp, il, l);
    else
      load_mla_attention(ld, hp, il, l);
    load_ffn(ld, hp, il, l);
  }
  return w;
}

}  // namespace latte
