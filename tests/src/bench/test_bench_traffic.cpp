// The weight bytes one generated token reads (src/bench/weight_traffic.h), checked against
// numbers worked out by hand from the fixtures' tensor lists.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <unistd.h>

#include "ggml-like/gguf/gguf.h"
#include "src/bench/weight_traffic.h"
#include "src/model/model.h"
#include "tests/support/test_support.h"

namespace test_bench_traffic {

namespace fs = std::filesystem;
using latte::bench::DecodeTraffic;

uint64_t q8(uint64_t n) { return n / 32 * 34; }  // bytes of a Q8_0 row of n weights
uint64_t f32(uint64_t n) { return n * 4; }

TEST(WeightTraffic, MoeModelByHand) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-lite-27l-q8_0.gguf");
  // ds2-lite-27l-q8_0: n_embd 128, vocab 512, 27 layers (layer 0 dense, FFN 256), 2 heads of
  // nope 128 + rope 64 and v 128, kv_lora 512, 4 experts of width 32 with 2 used, 2 shared
  // experts; every matrix Q8_0, norms and the router F32.
  const latte::Model model((latte::testing::shared_dir() / "fixtures/ds2-lite-27l-q8_0.gguf").string());
  const DecodeTraffic d = latte::bench::decode_weight_traffic(model);

  // Per layer: attn_norm [128], attn_q [128 x 384], attn_kv_a_mqa [128 x 576],
  // attn_kv_a_norm [512], attn_kv_b [512 x 512], attn_output [256 x 128].
  const uint64_t attention = f32(128) + 384 * q8(128) + 576 * q8(128) + f32(512) + 512 * q8(512) + 128 * q8(256);
  EXPECT_EQ(attention, 446464u);
  EXPECT_EQ(d.attention, 27 * attention);
  // ffn_norm in every layer; gate/up [128 x 256] and down [256 x 128] in layer 0.
  EXPECT_EQ(d.dense_ffn, 27 * f32(128) + 2 * 256 * q8(128) + 128 * q8(256));
  // ffn_gate_inp [128 x 4] F32 in the 26 MoE layers.
  EXPECT_EQ(d.router, 26 * 4 * f32(128));
  // Shared experts (2 x 32 wide): gate/up [128 x 64], down [64 x 128].
  EXPECT_EQ(d.shared_experts, 26 * (2 * 64 * q8(128) + 128 * q8(64)));
  // Routed: gate/up [128 x 32 x 4], down [32 x 128 x 4]; 2 of the 4 experts are read.
  EXPECT_EQ(d.routed_experts, 26 * (2 * (2 * 32 * q8(128)) + 2 * 128 * q8(32)));
  // output_norm [128] + output [128 x 512]; one Q8_0 row of token_embd.
  EXPECT_EQ(d.output, f32(128) + 512 * q8(128));
  EXPECT_EQ(d.embedding_row, q8(128));
  EXPECT_EQ(d.total(), 13654152u);
}

TEST(WeightTraffic, DenseLlamaReadsEverythingButTheEmbeddingTable) {
  LATTE_REQUIRE_SHARED("models/stories260K.gguf");
  // stories260K: llama, F32, n_embd 64, vocab 512, 5 layers, FFN 172, 8 heads / 4 KV heads of 8.
  const latte::Model model((latte::testing::shared_dir() / "models/stories260K.gguf").string());
  const DecodeTraffic d = latte::bench::decode_weight_traffic(model);
  // attn_norm, wq [64 x 64], wk and wv [64 x 32], wo [64 x 64] per layer.
  EXPECT_EQ(d.attention, 5 * f32(64 + 64 * 64 + 2 * 64 * 32 + 64 * 64));
  EXPECT_EQ(d.dense_ffn, 5 * f32(64 + 3 * 64 * 172));
  EXPECT_EQ(d.router + d.shared_experts + d.routed_experts, 0u);
  EXPECT_EQ(d.output, f32(64 + 64 * 512));
  EXPECT_EQ(d.embedding_row, f32(64));
  // Everything but 511 of the 512 embedding rows.
  uint64_t all = 0;
  for (const ggl::TensorInfo& t : model.file().tensors()) all += t.nbytes;
  EXPECT_EQ(d.total(), all - 511 * f32(64));
}

TEST(WeightTraffic, TiedHeadIsTheWholeEmbeddingTableOnce) {
  LATTE_REQUIRE_SHARED("models/stories260K.gguf");
  // The same model without output.weight: the head is token_embd, read whole for every token.
  const ggl::GgufFile src((latte::testing::shared_dir() / "models/stories260K.gguf").string());
  ggl::GgufWriter w;
  for (const auto& [key, value] : src.metadata().entries()) w.metadata().set(key, value);
  for (const ggl::TensorInfo& t : src.tensors()) {
    if (t.name == "output.weight") continue;
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
  }
  const fs::path path = fs::temp_directory_path() / ("latte-tied-" + std::to_string(::getpid()) + ".gguf");
  w.write(path.string());
  const latte::Model model(path.string());
  fs::remove(path);
  const DecodeTraffic d = latte::bench::decode_weight_traffic(model);
  EXPECT_EQ(d.output, f32(64) + f32(64 * 512));
  EXPECT_EQ(d.embedding_row, 0u);
}

TEST(WeightTraffic, CacheBytesGrowWithTheContext) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-lite-27l-q8_0.gguf");
  const latte::Model model((latte::testing::shared_dir() / "fixtures/ds2-lite-27l-q8_0.gguf").string());
  // MLA caches kv_lora 512 + rope 64 values per layer and position.
  EXPECT_EQ(latte::bench::cache_read_bytes(model.hparams(), ggl::Type::F16, 1), 27u * 576 * 2);
  EXPECT_EQ(latte::bench::cache_read_bytes(model.hparams(), ggl::Type::F32, 100), 100u * 27 * 576 * 4);
  EXPECT_EQ(latte::bench::cache_read_bytes(model.hparams(), ggl::Type::F16, 0), 0u);
}

}  // namespace test_bench_traffic
