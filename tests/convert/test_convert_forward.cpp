// Small random Hugging Face checkpoints, written here, converted, and evaluated by the engine: the
// logits must equal an independent computation straight from the safetensors weights
// (test_convert_support.h), within the F32 fixture thresholds.
#include <gtest/gtest.h>

#include "convert/convert_hf.h"
#include "ggml-like/gguf/gguf.h"
#include "src/model/model.h"
#include "src/runtime/session.h"
#include "tests/support/logit_metrics.h"
#include "tests/support/convert_support.h"

namespace test_convert_forward {

using namespace latte::convert_test;

json deepseek_v2_config() {
  return {
      {"architectures", {"DeepseekV2ForCausalLM"}},
      {"model_type", "deepseek_v2"},
      {"vocab_size", 96},
      {"hidden_size", 64},
      {"intermediate_size", 96},
      {"moe_intermediate_size", 32},
      {"num_hidden_layers", 3},
      {"num_attention_heads", 3},
      {"num_key_value_heads", 3},
      {"n_shared_experts", 2},
      {"n_routed_experts", 6},
      {"num_experts_per_tok", 2},
      {"routed_scaling_factor", 2.0},
      {"topk_method", "greedy"},
      {"n_group", 1},
      {"topk_group", 1},
      {"norm_topk_prob", false},
      {"scoring_func", "softmax"},
      {"first_k_dense_replace", 1},
      {"moe_layer_freq", 1},
      {"q_lora_rank", 48},
      {"kv_lora_rank", 64},
      {"qk_nope_head_dim", 32},
      {"qk_rope_head_dim", 16},
      {"v_head_dim", 24},
      {"rope_theta", 10000.0},
      // YaRN, evaluated well past the original context of 8 positions.
      {"rope_scaling",
       {{"type", "yarn"},
        {"factor", 4.0},
        {"original_max_position_embeddings", 8},
        {"beta_fast", 32},
        {"beta_slow", 1},
        {"mscale", 0.707},
        {"mscale_all_dim", 0.707}}},
      {"max_position_embeddings", 64},
      {"rms_norm_eps", 1e-6},
      {"tie_word_embeddings", false},
      {"torch_dtype", "float32"},
  };
}

json deepseek_v3_config() {
  json c = deepseek_v2_config();
  c["architectures"] = {"DeepseekV3ForCausalLM"};
  c["model_type"] = "deepseek_v3";
  c["num_hidden_layers"] = 3;
  c["num_attention_heads"] = 4;
  c["num_key_value_heads"] = 4;
  c["n_routed_experts"] = 8;
  c["n_shared_experts"] = 1;
  c["num_experts_per_tok"] = 3;
  c["routed_scaling_factor"] = 2.5;
  c["topk_method"] = "noaux_tc";
  c["scoring_func"] = "sigmoid";
  c["norm_topk_prob"] = true;
  c["q_lora_rank"] = 32;
  c["kv_lora_rank"] = 48;
  c["qk_nope_head_dim"] = 16;
  c["v_head_dim"] = 16;
  c["rope_scaling"] = {{"type", "yarn"},       {"factor", 8.0},  {"original_max_position_embeddings", 8},
                       {"beta_fast", 32},      {"beta_slow", 1}, {"mscale", 1.0},
                       {"mscale_all_dim", 1.0}};
  c["torch_dtype"] = "bfloat16";
  return c;
}

json llama_config() {
  return {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"vocab_size", 80},
      {"hidden_size", 64},
      {"intermediate_size", 112},
      {"num_hidden_layers", 2},
      {"num_attention_heads", 8},
      {"num_key_value_heads", 2},
      {"rope_theta", 500000.0},
      {"max_position_embeddings", 128},
      {"rms_norm_eps", 1e-5},
      {"tie_word_embeddings", false},
      {"hidden_act", "silu"},
  };
}

std::vector<int32_t> test_tokens(int64_t n_vocab, size_t n) {
  std::vector<int32_t> t;
  for (size_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 37 + 11) % n_vocab));
  return t;
}

std::string convert(const fs::path& dir, ggl::Type type, latte::convert::MlaLayout layout) {
  latte::convert::ConvertOptions o;
  o.input_dir = dir.string();
  o.output_path = (dir.parent_path() / (dir.filename().string() + ".gguf")).string();
  o.file_type = *latte::convert::file_type_of_base(type);
  o.mla_layout = layout;
  o.progress = false;
  o.on_notice = [](std::string_view) {};
  latte::convert::convert_hf_checkpoint(o);
  return o.output_path;
}

// Evaluates `tokens` in one batch with an F32 cache and compares with the reference logits.
void expect_matches_reference(const std::string& gguf, const std::vector<int32_t>& tokens,
                              const std::vector<double>& ref_d, int64_t n_vocab) {
  latte::Model model(gguf);
  latte::SessionOptions so;
  so.n_ctx = 64;
  so.cache_type = ggl::Type::F32;
  latte::Session session(model, so);
  std::vector<float> got = session.eval(tokens);
  std::vector<float> ref(ref_d.begin(), ref_d.end());
  ASSERT_EQ(got.size(), ref.size());
  latte::testing::LogitMetrics m = latte::testing::compare_logits(ref, got, static_cast<size_t>(n_vocab));
  EXPECT_LE(m.nrmse, 1e-3) << gguf;
  EXPECT_LE(m.max_kl, 1e-4) << gguf;
  EXPECT_EQ(m.top1, 1.0) << gguf;
  std::printf("%s: nrmse %.2e  max_kl %.2e  top1 %.3f\n", fs::path(gguf).filename().c_str(), m.nrmse, m.max_kl, m.top1);
}

TEST(ConvertForward, DeepSeekV2WithQLoraAndYarnMatchesDirectComputation) {
  const json config = deepseek_v2_config();
  HfWeights w = random_deepseek(config, 1234);
  const fs::path dir = fresh_dir("v2") / "ds-v2-random";
  write_checkpoint(dir, config, w, Dtype::F32);
  const auto tokens = test_tokens(config["vocab_size"], 40);
  const auto ref = deepseek_reference(config, w, tokens, /*v3=*/false);
  // Both MLA layouts must give the same model.
  expect_matches_reference(convert(dir, ggl::Type::F32, latte::convert::MlaLayout::KbVb), tokens, ref,
                           config["vocab_size"]);
  expect_matches_reference(convert(dir, ggl::Type::F32, latte::convert::MlaLayout::KvB), tokens, ref,
                           config["vocab_size"]);
}

TEST(ConvertForward, DeepSeekV2LiteStyleWithoutQLoraAndNormalisedRoutingMatchesDirectComputation) {
  json config = deepseek_v2_config();
  config["q_lora_rank"] = nullptr;  // V2-Lite: a plain q projection
  config["rope_scaling"] = nullptr;
  config["norm_topk_prob"] = true;  // V2 then ignores routed_scaling_factor
  config["routed_scaling_factor"] = 3.0;
  HfWeights w = random_deepseek(config, 321);
  const fs::path dir = fresh_dir("v2lite") / "ds-v2-lite-random";
  write_checkpoint(dir, config, w, Dtype::F16, 2);
  const auto tokens = test_tokens(config["vocab_size"], 25);
  const std::string gguf = convert(dir, ggl::Type::F32, latte::convert::MlaLayout::KbVb);
  ggl::GgufFile f(gguf);
  EXPECT_NE(f.find_tensor("blk.0.attn_q.weight"), nullptr);
  EXPECT_FALSE(f.metadata().has("deepseek2.attention.q_lora_rank"));
  expect_matches_reference(gguf, tokens, deepseek_reference(config, w, tokens, false), config["vocab_size"]);
}

TEST(ConvertForward, DeepSeekV3SigmoidRoutingBf16ShardedMatchesDirectComputation) {
  const json config = deepseek_v3_config();
  // One extra layer past num_hidden_layers: V3's multi-token-prediction head, to be skipped.
  HfWeights w = random_deepseek(config, 99, /*extra_layers=*/1);
  const fs::path dir = fresh_dir("v3") / "ds-v3-random";
  write_checkpoint(dir, config, w, Dtype::BF16, /*n_shards=*/3);
  const auto tokens = test_tokens(config["vocab_size"], 33);
  const auto ref = deepseek_reference(config, w, tokens, /*v3=*/true);
  // The weights are bf16 values: storing them as bf16 loses nothing.
  const std::string gguf = convert(dir, ggl::Type::BF16, latte::convert::MlaLayout::KbVb);
  ggl::GgufFile f(gguf);
  ASSERT_NE(f.find_tensor("blk.1.exp_probs_b.bias"), nullptr);
  EXPECT_EQ(f.find_tensor("blk.1.exp_probs_b.bias")->type, ggl::Type::F32);
  EXPECT_EQ(f.find_tensor("blk.1.ffn_up_exps.weight")->type, ggl::Type::BF16);
  EXPECT_EQ(f.find_tensor("blk.3.attn_norm.weight"), nullptr);  // the skipped extra layer
  EXPECT_EQ(f.metadata().get<uint32_t>("deepseek2.expert_gating_func"), 2u);
  expect_matches_reference(gguf, tokens, ref, config["vocab_size"]);
}

TEST(ConvertForward, DeepSeekV3GroupLimitedRoutingMatchesDirectComputation) {
  json config = deepseek_v3_config();
  config["n_group"] = 4;
  config["topk_group"] = 2;
  HfWeights w = random_deepseek(config, 7);
  const fs::path dir = fresh_dir("v3g") / "ds-v3-groups";
  write_checkpoint(dir, config, w, Dtype::F32, 2);
  const auto tokens = test_tokens(config["vocab_size"], 24);
  const std::string gguf = convert(dir, ggl::Type::F32, latte::convert::MlaLayout::KbVb);
  EXPECT_EQ(ggl::GgufFile(gguf).metadata().get<uint32_t>("deepseek2.expert_group_count"), 4u);
  expect_matches_reference(gguf, tokens, deepseek_reference(config, w, tokens, true), config["vocab_size"]);
}

TEST(ConvertForward, LlamaWithGqaMatchesDirectComputation) {
  const json config = llama_config();
  HfWeights w = random_llama(config, 42);
  const fs::path dir = fresh_dir("llama") / "llama-random";
  write_checkpoint(dir, config, w, Dtype::F16);
  const auto tokens = test_tokens(config["vocab_size"], 30);
  expect_matches_reference(convert(dir, ggl::Type::F32, latte::convert::MlaLayout::KbVb), tokens,
                           llama_reference(config, w, tokens), config["vocab_size"]);
}

TEST(ConvertForward, LlamaTiedEmbeddingsWriteNoOutputTensor) {
  json config = llama_config();
  config["tie_word_embeddings"] = true;
  config["num_key_value_heads"] = 4;
  HfWeights w = random_llama(config, 5);
  const fs::path dir = fresh_dir("llama-tied") / "llama-tied";
  write_checkpoint(dir, config, w, Dtype::F32);
  const std::string gguf = convert(dir, ggl::Type::F32, latte::convert::MlaLayout::KbVb);
  EXPECT_EQ(ggl::GgufFile(gguf).find_tensor("output.weight"), nullptr);
  const auto tokens = test_tokens(config["vocab_size"], 20);
  expect_matches_reference(gguf, tokens, llama_reference(config, w, tokens), config["vocab_size"]);
}

}  // namespace test_convert_forward
