#include "src/synth/geometry.h"

#include <fmt/format.h>

#include <algorithm>

#include "ggml-like/core/error.h"

namespace latte::synth {
namespace {

// DeepSeek-V2-Lite (config.json of deepseek-ai/DeepSeek-V2-Lite): 15.7B parameters, 2.4B active.
Geometry v2_lite() {
  Geometry g;
  g.preset = "v2-lite";
  g.title = "DeepSeek-V2-Lite";
  g.n_vocab = 102400;
  g.n_ctx_train = 163840;
  g.n_embd = 2048;
  g.n_layer = 27;
  g.n_head = 16;
  g.q_lora_rank = 0;  // q_lora_rank: null
  g.kv_lora_rank = 512;
  g.qk_nope = 128;
  g.qk_rope = 64;
  g.v_head_dim = 128;
  g.n_ff = 10944;
  g.n_leading_dense = 1;
  g.n_expert = 64;
  g.n_expert_used = 6;
  g.n_expert_shared = 2;
  g.n_ff_exp = 1408;
  g.gating = ExpertGating::kSoftmax;
  g.weights_norm = false;
  g.weights_scale = 1.0f;
  g.yarn_factor = 40.0f;
  g.yarn_original_ctx = 4096;
  g.yarn_mscale_all_dim = 0.707;
  return g;
}

// DeepSeek-V2 (deepseek-ai/DeepSeek-V2): 236B parameters, 21B active. Its routing is
// group_limited_greedy (8 groups, top 3), which GGUF cannot express: like `latte convert`, the
// file routes over all experts.
Geometry v2() {
  Geometry g = v2_lite();
  g.preset = "v2";
  g.title = "DeepSeek-V2";
  g.n_embd = 5120;
  g.n_layer = 60;
  g.n_head = 128;
  g.q_lora_rank = 1536;
  g.n_ff = 12288;
  g.n_expert = 160;
  g.n_ff_exp = 1536;
  g.weights_scale = 16.0f;  // routed_scaling_factor (norm_topk_prob false)
  return g;
}

// DeepSeek-V3 (deepseek-ai/DeepSeek-V3): 671B parameters, 37B active (without the
// multi-token-prediction layer, which decoding does not use).
Geometry v3() {
  Geometry g;
  g.preset = "v3";
  g.title = "DeepSeek-V3";
  g.n_vocab = 129280;
  g.n_ctx_train = 163840;
  g.n_embd = 7168;
  g.n_layer = 61;
  g.n_head = 128;
  g.q_lora_rank = 1536;
  g.kv_lora_rank = 512;
  g.qk_nope = 128;
  g.qk_rope = 64;
  g.v_head_dim = 128;
  g.n_ff = 18432;
  g.n_leading_dense = 3;
  g.n_expert = 256;
  g.n_expert_used = 8;
  g.n_expert_shared = 1;
  g.n_ff_exp = 2048;
  g.gating = ExpertGating::kSigmoid;
  g.expert_bias = true;  // topk_method noaux_tc: e_score_correction_bias
  g.weights_norm = true;
  g.weights_scale = 2.5f;
  g.n_groups = 8;
  g.n_groups_used = 4;
  g.yarn_factor = 40.0f;
  g.yarn_original_ctx = 4096;
  g.yarn_mscale_all_dim = 1.0;
  return g;
}

// Tiny models with the real latent geometry (kv_lora 512 + rope 64, nope 128, v 128) and the
// real vocabulary sizes, so that a DeepSeek tokenizer can be attached with --vocab; everything
// else is small enough to write in well under a second.
Geometry tiny() {
  Geometry g = v2_lite();
  g.preset = "tiny";
  g.title = "DeepSeek-V2-Lite-tiny";
  g.n_embd = 64;
  g.n_layer = 4;
  g.n_head = 4;
  g.n_ff = 256;
  g.n_expert = 8;
  g.n_expert_used = 2;
  g.n_ff_exp = 64;
  return g;
}

Geometry tiny_v3() {
  Geometry g = v3();
  g.preset = "tiny-v3";
  g.title = "DeepSeek-V3-tiny";
  g.n_embd = 64;
  g.n_layer = 4;
  g.n_head = 4;
  g.q_lora_rank = 96;
  g.n_ff = 256;
  g.n_leading_dense = 1;
  g.n_expert = 16;
  g.n_expert_used = 4;
  g.n_ff_exp = 64;
  g.n_groups = 4;
  g.n_groups_used = 2;
  return g;
}

struct Preset {
  const char* name;
  Geometry (*make)();
};
constexpr Preset kPresets[] = {
    {"v2-lite", v2_lite}, {"v2", v2}, {"v3", v3}, {"tiny", tiny}, {"tiny-v3", tiny_v3},
};

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  return names;
}

Geometry preset(std::string_view name) {
  for (const Preset& p : kPresets)
    if (name == p.name) return p.make();
  ggl::fail("unknown preset '{}' (known: {})", name, fmt::join(preset_names(), ", "));
}

Geometry with_layers(Geometry g, int64_t n) {
  if (n < 1) ggl::fail("--layers {} must be at least 1", n);
  g.n_layer = n;
  g.n_leading_dense = std::min(g.n_leading_dense, n);
  return g;
}

}  // namespace latte::synth
