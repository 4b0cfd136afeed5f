// From a Hugging Face config.json and checkpoint to the GGUF architecture, hyperparameter
// metadata and tensor recipes. One planner per supported architecture family.
#pragma once
#include <string>
#include <vector>

#include "convert/json_file.h"
#include "convert/safetensors.h"
#include "convert/tensor_plan.h"
#include "ggml-like/gguf/gguf.h"

namespace latte::convert {

enum class MlaLayout {
  KvB,   // the single attn_kv_b of older GGUFs
  KbVb,  // attn_k_b + attn_v_b, the layout current converters write (default)
};

struct PlanOptions {
  MlaLayout mla_layout = MlaLayout::KbVb;
};

struct ModelPlan {
  std::string arch;                    // GGUF architecture: "deepseek2", "llama"
  ggl::Metadata hparams;               // "<arch>.*" keys in the order they are written
  std::vector<PlannedTensor> tensors;  // in the order they are written
  int64_t n_vocab = 0;                 // rows of token_embd
  std::vector<std::string> notices;    // things the user should know (printed by the driver)
};

// Reads config.json's "architectures" and dispatches; an unknown architecture is
// "unsupported architecture X; supported: ...".
ModelPlan plan_model(const JsonObject& config, const SafetensorsCheckpoint& ckpt, const PlanOptions& opts);

// The per-family planners (config.json already known to name their architecture).
ModelPlan plan_deepseek2(const JsonObject& config, const SafetensorsCheckpoint& ckpt, const PlanOptions& opts);
ModelPlan plan_llama(const JsonObject& config, const SafetensorsCheckpoint& ckpt, const PlanOptions& opts);

// Helpers shared by the per-family planners.
// config[key] as a positive integer; a one-line error naming the file and key otherwise.
int64_t positive_int(const JsonObject& config, const std::string& key);
// "model.layers.<il>.<rest>" (Hugging Face) and "blk.<il>.<rest>" (GGUF) tensor names.
std::string hf_layer_name(int64_t il, const char* rest);
std::string gguf_block_name(int64_t il, const char* rest);
// Layer il's tensor `hf` (model.layers.<il>.<hf>, of the given HF shape) copied as blk.<il>.<gguf>.
PlannedTensor plan_layer_copy(CheckpointTensors& ck, int64_t il, const char* gguf, const char* hf,
                              const std::vector<int64_t>& shape);
// Layer il's dense SwiGLU feed-forward (mlp.gate_proj / up_proj / down_proj), Llama's and
// DeepSeek's first layers': ffn_gate, ffn_up, ffn_down.
void plan_dense_ffn(CheckpointTensors& ck, int64_t il, int64_t n_ff, int64_t n_embd, std::vector<PlannedTensor>& out);

// Typed metadata setters (GGUF stores these hyperparameters as u32 / f32 / bool / string).
void put_u32(ggl::Metadata& md, std::string key, int64_t v);
void put_f32(ggl::Metadata& md, std::string key, double v);
void put_bool(ggl::Metadata& md, std::string key, bool v);
void put_str(ggl::Metadata& md, std::string key, std::string v);

}  // namespace latte::convert
