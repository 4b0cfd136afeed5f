// The geometry of a DeepSeek model (GGUF architecture "deepseek2"): every dimension and routing
// setting a synthetic file needs, as published in the models' Hugging Face config.json files.
// Presets: the real DeepSeek-V2-Lite, V2 and V3 shapes, plus two tiny ones (V2-Lite and V3
// flavoured) for tests and quick checks.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/model/hparams.h"

namespace latte::synth {

struct Geometry {
  std::string preset;  // the preset's name ("v2-lite", ...)
  std::string title;   // default general.name, e.g. "DeepSeek-V2-Lite"
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;  // max_position_embeddings
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  // Multi-head latent attention.
  int64_t q_lora_rank = 0;  // 0: the query is one projection (V2-Lite)
  int64_t kv_lora_rank = 0;
  int64_t qk_nope = 0;
  int64_t qk_rope = 0;
  int64_t v_head_dim = 0;
  // Feed-forward: the first n_leading_dense layers are dense SwiGLU of width n_ff; the rest are
  // DeepSeekMoE (n_expert routed experts of width n_ff_exp, top n_expert_used, plus
  // n_expert_shared always-on experts).
  int64_t n_ff = 0;
  int64_t n_leading_dense = 0;
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_expert_shared = 0;
  int64_t n_ff_exp = 0;
  ExpertGating gating = ExpertGating::kSoftmax;
  bool expert_bias = false;  // V3's selection bias exp_probs_b (aux-loss-free balancing)
  bool weights_norm = false;
  float weights_scale = 1.0f;
  int64_t n_groups = 1;  // group-limited routing as GGUF expresses it (V3: 8 groups, 4 kept)
  int64_t n_groups_used = 1;
  float rms_eps = 1e-6f;
  float rope_base = 10000.0f;
  // YaRN context extension.
  float yarn_factor = 1.0f;
  int64_t yarn_original_ctx = 0;
  double yarn_mscale_all_dim = 0.0;  // GGUF stores 0.1 * this as yarn_log_multiplier
};

// A preset by name; throws ggl::Error naming the known presets for an unknown one.
Geometry preset(std::string_view name);
std::vector<std::string> preset_names();  // in the order --help lists them

// The same model with n layers (the leading dense layers are kept up to n). Throws for n < 1.
Geometry with_layers(Geometry g, int64_t n);

}  // namespace latte::synth
