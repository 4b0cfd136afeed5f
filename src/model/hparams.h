// Hyperparameters of a model, read from GGUF metadata (keys prefixed by the architecture name)
// and validated. Every dimension the forward pass uses comes from here or from tensor shapes.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "ggml-like/gguf/gguf.h"

namespace latte {

enum class Arch { kLlama, kDeepseek2 };

enum class RopeScaling { kNone, kLinear, kYarn };

struct RopeConfig {
  int64_t n_rot = 0;  // leading dimensions of each head that are rotated
  float freq_base = 10000.0f;
  RopeScaling scaling = RopeScaling::kNone;
  float factor = 1.0f;           // context extension factor (frequencies divided by it)
  int64_t original_context = 0;  // YaRN: the context the model was trained with before extension
  float yarn_log_multiplier = 0.0f;
};

enum class ExpertGating { kSoftmax = 1, kSigmoid = 2 };

// DeepSeekMoE: routed experts (top-k of n_expert) plus always-on shared experts.
struct MoeConfig {
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_expert_shared = 0;
  int64_t n_ff_exp = 0;         // width of one expert
  int64_t n_leading_dense = 0;  // the first layers use a dense FFN
  ExpertGating gating = ExpertGating::kSoftmax;
  float weights_scale = 1.0f;
  bool weights_norm = false;
  int64_t n_groups = 1;  // group-limited routing (DeepSeek-V3): groups and groups kept
  int64_t n_groups_used = 1;
};

// Multi-head latent attention (DeepSeek-V2/V3).
struct MlaConfig {
  int64_t q_lora_rank = 0;  // 0: no attn_q_a tensors (queries projected directly, V2-Lite)
  int64_t kv_lora_rank = 0;
  int64_t qk_nope = 0;
  int64_t qk_rope = 0;
  int64_t v_head_dim = 0;
};

struct Hparams {
  Arch arch = Arch::kLlama;
  std::string arch_name;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;   // llama: KV heads (GQA); deepseek2: as stored (MLA ignores it)
  int64_t n_ff = 0;        // dense FFN width
  int64_t head_dim_k = 0;  // per-head key width (deepseek2: nope + rope)
  int64_t head_dim_v = 0;  // per-head value width
  float rms_eps = 1e-5f;
  RopeConfig rope;
  MlaConfig mla;  // deepseek2 only
  MoeConfig moe;  // deepseek2 only

  bool is_mla() const { return arch == Arch::kDeepseek2; }
};

// Reads and validates; throws ggl::Error("FILE: ...") for an unsupported architecture, a missing
// key or inconsistent values.
Hparams read_hparams(const ggl::GgufFile& file);

std::string_view arch_name(Arch arch);

}  // namespace latte
