// What a synthetic deepseek2 GGUF holds: the "deepseek2.*" hyperparameter keys and the tensor
// list, with exactly the names, shapes, key names and order `latte convert` writes for a real
// DeepSeek checkpoint (and llama.cpp's converter writes the same names and shapes).
//
// MLA layout: kv_b (one blk.N.attn_kv_b per layer, per-head [k_nope ; v] rows from the latent)
// is what older llama.cpp-family engines load and what current ones still accept; k_b writes
// attn_k_b + attn_v_b with the *_mla keys, the layout of current converters.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "convert/model_plan.h"
#include "ggml-like/gguf/gguf.h"
#include "src/synth/geometry.h"

namespace latte::synth {

// How a tensor's random values are drawn (see random_weights.h).
enum class WeightInit {
  kMatrix,  // zero-mean, standard deviation 1/sqrt(fan_in): activations keep their scale
  kNorm,    // RMSNorm gains near 1
  kBias,    // small values around 0 (the expert selection bias)
};

struct SynthTensor {
  std::string name;
  std::vector<int64_t> ne;  // fastest-first, as in GGUF
  WeightInit init = WeightInit::kMatrix;
  int64_t fan_in = 1;  // kMatrix: the length of the vectors each row is multiplied with

  int64_t n_elements() const;
  int64_t rows() const { return n_elements() / ne[0]; }
};

// In the order they are written: token_embd, output_norm, output, then layer by layer.
std::vector<SynthTensor> plan_tensors(const Geometry& g, convert::MlaLayout layout);

// Appends the "deepseek2.*" hyperparameters (no general.* and no tokenizer keys).
void add_hparams(const Geometry& g, convert::MlaLayout layout, ggl::Metadata& md);

int64_t parameter_count(const std::vector<SynthTensor>& tensors);

}  // namespace latte::synth
