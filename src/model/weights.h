// The model's tensors, located by name in the GGUF file and checked against the shapes the
// hyperparameters imply. Nothing is copied: every entry points into the file's mapping.
#pragma once
#include <vector>

#include "ggml-like/gguf/gguf.h"
#include "src/model/hparams.h"

namespace latte {

using WeightRef = const ggl::TensorInfo*;  // nullptr: absent (optional tensors only)

struct LayerWeights {
  WeightRef attn_norm = nullptr;
  WeightRef wo = nullptr;
  // llama
  WeightRef wq = nullptr;  // also deepseek2 without q_lora (V2-Lite)
  WeightRef wk = nullptr;
  WeightRef wv = nullptr;
  // deepseek2 (MLA)
  WeightRef wq_a = nullptr;  // q_lora: wq_a -> norm -> wq_b
  WeightRef wq_a_norm = nullptr;
  WeightRef wq_b = nullptr;
  WeightRef wkv_a_mqa = nullptr;  // [latent ; rope key] from the hidden state
  WeightRef wkv_a_norm = nullptr;
  WeightRef wkv_b = nullptr;  // older files: per head [k_nope ; v] rows from the latent
  WeightRef wk_b = nullptr;   // current files: [n_head][kv_lora][nope] (numpy order)
  WeightRef wv_b = nullptr;   //                [n_head][v][kv_lora]
  // feed-forward
  WeightRef ffn_norm = nullptr;
  WeightRef ffn_gate = nullptr;  // dense SwiGLU
  WeightRef ffn_up = nullptr;
  WeightRef ffn_down = nullptr;
  WeightRef ffn_gate_inp = nullptr;  // MoE router
  WeightRef exp_probs_b = nullptr;   // selection bias (V3)
  WeightRef ffn_gate_exps = nullptr;
  WeightRef ffn_up_exps = nullptr;
  WeightRef ffn_down_exps = nullptr;
  WeightRef ffn_gate_shexp = nullptr;
  WeightRef ffn_up_shexp = nullptr;
  WeightRef ffn_down_shexp = nullptr;

  bool is_moe() const { return ffn_gate_inp != nullptr; }
};

struct ModelWeights {
  WeightRef token_embd = nullptr;
  WeightRef output_norm = nullptr;
  WeightRef output = nullptr;      // token_embd when the file ties them
  WeightRef rope_freqs = nullptr;  // optional per-pair frequency divisors (llama 3.1 style)
  std::vector<LayerWeights> layers;
};

// Every weight slot of the table (absent ones, nullptr, included), for redirecting them (a
// session's copy whose offloaded tensors point into a device's memory).
template <typename F>
void for_each_weight(ModelWeights& w, F&& f) {
  for (WeightRef* r : {&w.token_embd, &w.output_norm, &w.output, &w.rope_freqs}) f(*r);
  for (LayerWeights& l : w.layers)
    for (WeightRef* r : {&l.attn_norm,
                         &l.wo,
                         &l.wq,
                         &l.wk,
                         &l.wv,
                         &l.wq_a,
                         &l.wq_a_norm,
                         &l.wq_b,
                         &l.wkv_a_mqa,
                         &l.wkv_a_norm,
                         &l.wkv_b,
                         &l.wk_b,
                         &l.wv_b,
                         &l.ffn_norm,
                         &l.ffn_gate,
                         &l.ffn_up,
                         &l.ffn_down,
                         &l.ffn_gate_inp,
                         &l.exp_probs_b,
                         &l.ffn_gate_exps,
                         &l.ffn_up_exps,
                         &l.ffn_down_exps,
                         &l.ffn_gate_shexp,
                         &l.ffn_up_shexp,
                         &l.ffn_down_shexp})
      f(*r);
}

// Throws ggl::Error("FILE: tensor 'NAME' ...") for a missing tensor, a wrong shape (naming the
// expected and the actual shape) or an unusable element type.
ModelWeights load_weights(const ggl::GgufFile& file, const Hparams& hp);

}  // namespace latte
