#include "convert/model_plan.h"

#include <limits>

namespace latte::convert {
namespace {

struct Family {
  const char* hf_architecture;
  ModelPlan (*plan)(const JsonObject&, const SafetensorsCheckpoint&, const PlanOptions&);
};

constexpr Family kFamilies[] = {
    {"DeepseekV2ForCausalLM", plan_deepseek2},
    {"DeepseekV3ForCausalLM", plan_deepseek2},
    {"LlamaForCausalLM", plan_llama},
};

}  // namespace

int64_t positive_int(const JsonObject& config, const std::string& key) {
  int64_t v = config.get_int(key);
  if (v <= 0) ggl::fail("{}: key '{}' must be positive, got {}", config.source(), key, v);
  return v;
}

std::string hf_layer_name(int64_t il, const char* rest) { return fmt::format("model.layers.{}.{}", il, rest); }
std::string gguf_block_name(int64_t il, const char* rest) { return fmt::format("blk.{}.{}", il, rest); }

PlannedTensor plan_layer_copy(CheckpointTensors& ck, int64_t il, const char* gguf, const char* hf,
                              const std::vector<int64_t>& shape) {
  return plan_copy(gguf_block_name(il, gguf), ck.take(hf_layer_name(il, hf), shape));
}

void plan_dense_ffn(CheckpointTensors& ck, int64_t il, int64_t n_ff, int64_t n_embd, std::vector<PlannedTensor>& out) {
  out.push_back(plan_layer_copy(ck, il, "ffn_gate.weight", "mlp.gate_proj.weight", {n_ff, n_embd}));
  out.push_back(plan_layer_copy(ck, il, "ffn_up.weight", "mlp.up_proj.weight", {n_ff, n_embd}));
  out.push_back(plan_layer_copy(ck, il, "ffn_down.weight", "mlp.down_proj.weight", {n_embd, n_ff}));
}

ModelPlan plan_model(const JsonObject& config, const SafetensorsCheckpoint& ckpt, const PlanOptions& opts) {
  std::string supported;
  for (const Family& f : kFamilies) supported += (supported.empty() ? "" : ", ") + std::string(f.hf_architecture);
  auto it = config.raw().find("architectures");
  if (it == config.raw().end() || !it->is_array() || it->empty() || !(*it)[0].is_string())
    ggl::fail("{}: missing key 'architectures' (a list naming the model class; supported: {})", config.source(),
              supported);
  const std::string arch = (*it)[0].get<std::string>();
  for (const Family& f : kFamilies)
    if (arch == f.hf_architecture) return f.plan(config, ckpt, opts);
  ggl::fail("{}: unsupported architecture {}; supported: {}", config.source(), arch, supported);
}

void put_u32(ggl::Metadata& md, std::string key, int64_t v) {
  if (v < 0 || v > std::numeric_limits<uint32_t>::max())
    ggl::fail("config.json: value {} for {} does not fit in u32", v, key);
  md.set(std::move(key), ggl::Value{static_cast<uint32_t>(v)});
}
void put_f32(ggl::Metadata& md, std::string key, double v) {
  md.set(std::move(key), ggl::Value{static_cast<float>(v)});
}
void put_bool(ggl::Metadata& md, std::string key, bool v) { md.set(std::move(key), ggl::Value{v}); }
void put_str(ggl::Metadata& md, std::string key, std::string v) { md.set(std::move(key), ggl::Value{std::move(v)}); }

}  // namespace latte::convert
