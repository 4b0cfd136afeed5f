// What each tensor of a model is for, as far as placing it goes: the planner decides by role and
// layer (placement.h), never by name patterns of its own. Names are llama.cpp's GGUF names.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ggml-like/gguf/gguf.h"
#include "src/model/hparams.h"

namespace latte {

enum class TensorRole {
  kEmbedding,      // token_embd: a few rows read per token; stays with the CPU
  kAttention,      // attn_* of a layer, its norm included
  kCache,          // a layer's cache (MLA latent, or K/V): not a file tensor, sized by -c
  kDenseFfn,       // ffn_gate/up/down of a dense layer, and its ffn_norm
  kSharedExpert,   // *_shexp, and the ffn_norm of a MoE layer
  kRouter,         // ffn_gate_inp, exp_probs_b
  kRoutedExperts,  // *_exps: each token reads n_expert_used of n_expert
  kOutputHead,     // output_norm, output
  kOther,          // anything else (rope_freqs, ...)
};
std::string_view tensor_role_name(TensorRole r);

struct PlanTensor {
  std::string name;
  size_t bytes = 0;
  int layer = -1;  // -1: not a layer's
  TensorRole role = TensorRole::kOther;
};

// Role and layer of one tensor by name. ffn_norm is taken as a dense layer's (kDenseFfn);
// classify_tensors() gives a MoE layer's ffn_norm to its shared experts.
PlanTensor classify_tensor(std::string name, size_t bytes);

// Every file tensor classified, plus one kCache entry per layer named "cache.<layer>" holding
// cache_bytes_per_layer.
std::vector<PlanTensor> classify_tensors(std::span<const ggl::TensorInfo> tensors, int64_t n_layer,
                                         size_t cache_bytes_per_layer);

}  // namespace latte
