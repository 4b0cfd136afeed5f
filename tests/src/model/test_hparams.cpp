// Metadata of real DeepSeek files as read by read_hparams: both MLA layouts (per-head key sizes in
// key_length, or the absorbed view with *_mla keys), YaRN with and without yarn_log_multiplier,
// gating and group keys that may be absent, up to 384 experts, and DeepSeek-V3.2's refusal.
#include <gtest/gtest.h>

#include <filesystem>

#include "ggml-like/gguf/gguf.h"
#include "src/model/hparams.h"
#include "tests/support/test_support.h"

namespace test_hparams {

namespace fs = std::filesystem;

// A deepseek2 header (no tensors) in the V3 flavour; `edit` adjusts the keys before writing.
fs::path write_header(const std::string& file, const std::function<void(ggl::Metadata&)>& edit,
                      const std::string& arch = "deepseek2") {
  ggl::GgufWriter w;
  ggl::Metadata& md = w.metadata();
  auto u32 = [&](const std::string& k, uint32_t v) { md.set(arch + "." + k, ggl::Value{v}); };
  md.set("general.architecture", ggl::Value{arch});
  u32("context_length", 4096);
  u32("embedding_length", 7168);
  u32("block_count", 61);
  u32("feed_forward_length", 18432);
  u32("attention.head_count", 128);
  u32("attention.head_count_kv", 128);
  u32("attention.q_lora_rank", 1536);
  u32("attention.kv_lora_rank", 512);
  u32("attention.key_length", 192);
  u32("attention.value_length", 128);
  u32("rope.dimension_count", 64);
  u32("leading_dense_block_count", 3);
  u32("expert_count", 256);
  u32("expert_used_count", 8);
  u32("expert_shared_count", 1);
  u32("expert_feed_forward_length", 2048);
  u32("expert_gating_func", 2);
  u32("expert_group_count", 8);
  u32("expert_group_used_count", 4);
  u32("vocab_size", 129280);
  md.set(arch + ".expert_weights_scale", ggl::Value{2.5f});
  md.set(arch + ".expert_weights_norm", ggl::Value{true});
  md.set(arch + ".rope.scaling.type", ggl::Value{std::string("yarn")});
  md.set(arch + ".rope.scaling.factor", ggl::Value{40.0f});
  u32("rope.scaling.original_context_length", 4096);
  md.set(arch + ".rope.scaling.yarn_log_multiplier", ggl::Value{0.1f});
  edit(md);
  const fs::path path = fs::path(::testing::TempDir()) / file;
  w.write(path.string());
  return path;
}

latte::Hparams read(const fs::path& path) { return latte::read_hparams(ggl::GgufFile(path.string())); }

TEST(Hparams, DeepSeekV3WithKvbLayout) {
  const latte::Hparams hp = read(write_header("v3-kvb.gguf", [](ggl::Metadata&) {}));
  EXPECT_EQ(hp.head_dim_k, 192);
  EXPECT_EQ(hp.head_dim_v, 128);
  EXPECT_EQ(hp.mla.qk_nope, 128);
  EXPECT_EQ(hp.mla.qk_rope, 64);
  EXPECT_EQ(hp.mla.kv_lora_rank, 512);
  EXPECT_EQ(hp.moe.n_expert, 256);
  EXPECT_EQ(hp.moe.n_groups, 8);
  EXPECT_EQ(hp.moe.n_groups_used, 4);
  EXPECT_EQ(hp.moe.gating, latte::ExpertGating::kSigmoid);
  EXPECT_FLOAT_EQ(hp.rope.yarn_log_multiplier, 0.1f);  // 0.1 x mscale_all_dim (1.0)
  EXPECT_FLOAT_EQ(hp.rope.factor, 40.0f);
}

// Current converters: key_length 576 / value_length 512 are the absorbed view (kv_lora + rope),
// head_count_kv 1, and the per-head sizes move to key_length_mla / value_length_mla.
TEST(Hparams, DeepSeekV3WithKbVbLayout) {
  const latte::Hparams hp = read(write_header("v3-kbvb.gguf", [](ggl::Metadata& md) {
    md.set("deepseek2.attention.head_count_kv", ggl::Value{uint32_t{1}});
    md.set("deepseek2.attention.key_length", ggl::Value{uint32_t{576}});
    md.set("deepseek2.attention.value_length", ggl::Value{uint32_t{512}});
    md.set("deepseek2.attention.key_length_mla", ggl::Value{uint32_t{192}});
    md.set("deepseek2.attention.value_length_mla", ggl::Value{uint32_t{128}});
  }));
  EXPECT_EQ(hp.head_dim_k, 192);
  EXPECT_EQ(hp.head_dim_v, 128);
  EXPECT_EQ(hp.mla.qk_nope, 128);
  EXPECT_EQ(hp.mla.v_head_dim, 128);
  EXPECT_EQ(hp.n_head_kv, 1);
}

// Older V2 files: no yarn_log_multiplier (no attention temperature), no gating function
// (softmax), no groups.
TEST(Hparams, AbsentKeysTakeTheOlderMeaning) {
  const latte::Hparams hp = read(write_header("v2.gguf", [](ggl::Metadata& md) {
    for (const char* k :
         {"rope.scaling.yarn_log_multiplier", "expert_gating_func", "expert_group_count", "expert_group_used_count"})
      md.erase("deepseek2." + std::string(k));
    md.set("deepseek2.expert_count", ggl::Value{uint32_t{160}});
    md.set("deepseek2.expert_used_count", ggl::Value{uint32_t{6}});
  }));
  EXPECT_EQ(hp.rope.yarn_log_multiplier, 0.0f);
  EXPECT_EQ(hp.rope.scaling, latte::RopeScaling::kYarn);
  EXPECT_EQ(hp.moe.gating, latte::ExpertGating::kSoftmax);
  EXPECT_EQ(hp.moe.n_groups, 1);
  EXPECT_EQ(hp.moe.n_groups_used, 1);
}

// Kimi-K2: 384 experts, one group.
TEST(Hparams, ThreeHundredEightyFourExperts) {
  const latte::Hparams hp = read(write_header("k2.gguf", [](ggl::Metadata& md) {
    md.set("deepseek2.expert_count", ggl::Value{uint32_t{384}});
    md.set("deepseek2.expert_group_count", ggl::Value{uint32_t{1}});
    md.set("deepseek2.expert_group_used_count", ggl::Value{uint32_t{1}});
    md.set("deepseek2.attention.head_count", ggl::Value{uint32_t{64}});
  }));
  EXPECT_EQ(hp.moe.n_expert, 384);
  EXPECT_EQ(hp.moe.n_expert_used, 8);
}

TEST(Hparams, BadGroupsAreErrors) {
  const fs::path path = write_header("badgroups.gguf", [](ggl::Metadata& md) {
    md.set("deepseek2.expert_group_count", ggl::Value{uint32_t{3}});  // 256 experts do not split in 3
  });
  EXPECT_THROW(read(path), ggl::Error);
}

// DeepSeek-V3.2 (sparse attention): refused in one line by every command that loads a model.
TEST(Hparams, DeepSeekV32IsNotSupportedYet) {
  const fs::path path = write_header(
      "v32.gguf", [](ggl::Metadata&) {}, "deepseek32");
  try {
    read(path);
    ADD_FAILURE() << "no error";
  } catch (const ggl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not supported yet"), std::string::npos) << e.what();
  }
  const auto r = latte::testing::run_latte("run -m '" + path.string() + "' -p hi -n 1");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(r.out.find("DeepSeek-V3.2 (architecture 'deepseek32', sparse attention) is not supported yet"),
            std::string::npos)
      << r.out;
}

}  // namespace test_hparams
