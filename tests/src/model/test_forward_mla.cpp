// MLA specifics and the Session API: absorbed and naive attention agree, decode uses the
// absorbed path, the cache holds only the latent (its size per token), the footprint function,
// truncation, last-position logits, and load/eval errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "ggml-like/core/error.h"
#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/gguf/gguf.h"
#include "src/model/cache_footprint.h"
#include "src/runtime/session.h"
#include "tests/support/logit_metrics.h"
#include "tests/support/test_support.h"
#include "tests/support/kernel_sets.h"

namespace test_forward_mla {

namespace fs = std::filesystem;
using latte::MlaMode;

std::vector<int32_t> fixture_tokens(const std::string& name) {
  return latte::testing::read_token_file(latte::testing::shared_dir() / ("fixtures/" + name + ".tokens.txt"));
}

std::string fixture_path(const std::string& name) {
  return (latte::testing::shared_dir() / ("fixtures/" + name + ".gguf")).string();
}

// Prefill of `prefill` tokens, then one token at a time.
std::vector<float> run(const latte::Model& model, const std::vector<int32_t>& tokens, MlaMode mode, size_t prefill,
                       ggl::Type cache = ggl::Type::F32) {
  latte::Session s(model, {.n_ctx = 128, .cache_type = cache, .mla_mode = mode, .n_threads = 1});
  const std::span<const int32_t> all(tokens);
  std::vector<float> out = s.eval(all.first(prefill));
  for (size_t i = prefill; i < tokens.size(); ++i) {
    auto step = s.eval(all.subspan(i, 1));
    out.insert(out.end(), step.begin(), step.end());
  }
  return out;
}

// The automatic choice over the same tokens: the prefill's first `prefill - kCachedChunk` tokens
// (a fresh prompt: the naive form), then its last kCachedChunk tokens after them (a short chunk
// after a cached prefix: the absorbed form, reading the latents the naive form cached), then one
// token at a time (absorbed). Each batch's path is checked, so the run takes both forms.
constexpr size_t kCachedChunk = 4;

std::vector<float> run_auto(const latte::Model& model, const std::vector<int32_t>& tokens, size_t prefill) {
  latte::Session s(model, {.n_ctx = 128, .cache_type = ggl::Type::F32, .mla_mode = MlaMode::kAuto, .n_threads = 1});
  const std::span<const int32_t> all(tokens);
  std::vector<float> out = s.eval(all.first(prefill - kCachedChunk));
  EXPECT_EQ(s.last_mla_path(), MlaMode::kNaive) << "a fresh prompt of " << prefill - kCachedChunk << " tokens";
  for (size_t begin = prefill - kCachedChunk; begin < tokens.size();) {
    const size_t count = begin < prefill ? kCachedChunk : 1;
    const auto step = s.eval(all.subspan(begin, count));
    begin += count;
    EXPECT_EQ(s.last_mla_path(), MlaMode::kAbsorb) << count << " tokens after " << begin - count << " cached ones";
    out.insert(out.end(), step.begin(), step.end());
  }
  return out;
}

class MlaFixture : public ::testing::TestWithParam<const char*> {};

// The two forms are the same mathematics: in float32 they agree to rounding. With the integer
// GEMM (quantized weights, 16-bit activations) they multiply different matrices, so each carries
// its own activation rounding; they must still agree within the 16-bit budget the fixtures README
// gives an F16 cache (nrmse 2e-3) with the same top token everywhere.
struct IntGemmSwitch {
  explicit IntGemmSwitch(bool on) { ggl::set_int_gemm_enabled(on); }
  ~IntGemmSwitch() { ggl::set_int_gemm_enabled(true); }
};

TEST_P(MlaFixture, AbsorbedAndNaiveAttentionAgree) {
  const std::string name = GetParam();
  LATTE_REQUIRE_SHARED("fixtures/" + name + ".gguf");
  const latte::Model model(fixture_path(name));
  const auto tokens = fixture_tokens(name);
  const size_t n_vocab = static_cast<size_t>(model.hparams().n_vocab);
  // With every kernel set; the integer runs only with the sets that have integer GEMMs (in the
  // others they would repeat the float runs, so they are named and left out).
  latte::testing::for_each_kernel_set([&](const ggl::CpuKernels& set) {
    for (bool integer : {false, true}) {
      if (integer && !set.int16->supports(ggl::Type::Q8_0, 32)) {
        EXPECT_FALSE(latte::testing::set_should_have(set.isa, latte::testing::IntPath::kInt16Gemm))
            << set.isa << " has no 16-bit integer GEMM, which it is meant to have";
        std::printf("[note] kernel set %s has no integer GEMM: integer runs left out\n", set.isa);
        continue;
      }
      const IntGemmSwitch gemm(integer);
      for (size_t prefill : {tokens.size(), size_t{40}}) {
        const auto absorbed = run(model, tokens, MlaMode::kAbsorb, prefill);
        const auto naive = run(model, tokens, MlaMode::kNaive, prefill);
        const auto automatic = run_auto(model, tokens, prefill);
        const auto an = latte::testing::compare_logits(naive, absorbed, n_vocab);
        const auto aa = latte::testing::compare_logits(naive, automatic, n_vocab);
        std::printf(
            "[metrics] %s %s prefill %zu integer GEMM %d: absorb vs naive nrmse=%.3e max_kl=%.3e "
            "top1=%.3f; auto vs naive nrmse=%.3e\n",
            name.c_str(), set.isa, prefill, integer, an.nrmse, an.max_kl, an.top1, aa.nrmse);
        EXPECT_LE(an.nrmse, integer ? 2e-3 : 1e-5);
        EXPECT_LE(an.max_kl, integer ? 1e-4 : 1e-8);
        EXPECT_EQ(an.top1, 1.0);
        EXPECT_LE(aa.nrmse, integer ? 2e-3 : 1e-5);
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, MlaFixture,
                         ::testing::Values("ds2-v2-tiny-f32",     // attn_kv_b, q_lora, YaRN
                                           "ds2-mini-mla-f32",    // attn_k_b + attn_v_b, sigmoid routing
                                           "ds2-lite-27l-q8_0"),  // no q_lora, 27 layers
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) c = isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return s;
                         });

TEST(MlaPath, AutoAbsorbsDecodeAndExpandsFreshPrefill) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-f32.gguf");
  const latte::Model model(fixture_path("ds2-v2-tiny-f32"));
  const latte::Hparams& hp = model.hparams();
  EXPECT_EQ(latte::choose_mla_path(hp, 1, 0, MlaMode::kAuto), MlaMode::kAbsorb);
  EXPECT_EQ(latte::choose_mla_path(hp, 1, 4000, MlaMode::kAuto), MlaMode::kAbsorb);
  EXPECT_EQ(latte::choose_mla_path(hp, 512, 0, MlaMode::kAuto), MlaMode::kNaive);
  // A short chunk after a long cached prefix: expanding the whole prefix is not worth it.
  EXPECT_EQ(latte::choose_mla_path(hp, 4, 4000, MlaMode::kAuto), MlaMode::kAbsorb);
  // Faster up-projections (the integer GEMM) or naive attention make expanding cheaper, not free.
  EXPECT_EQ(latte::choose_mla_path(hp, 512, 0, MlaMode::kAuto, {.latent_gemm = 1.3}), MlaMode::kNaive);
  EXPECT_EQ(latte::choose_mla_path(hp, 4, 4000, MlaMode::kAuto, {1.3, 1.7}), MlaMode::kAbsorb);
  EXPECT_EQ(latte::choose_mla_path(hp, 64, 4096, MlaMode::kAuto, {1.0, 1.0}), MlaMode::kAbsorb);
  EXPECT_EQ(latte::choose_mla_path(hp, 64, 4096, MlaMode::kAuto, {.latent_gemm = 4.0}), MlaMode::kNaive);
  // The V2-Lite calibration (README): absorb at 128 tokens after 4096, naive at 256 with the
  // integer attention kernel, absorb at 256 without it.
  EXPECT_EQ(latte::choose_mla_path(hp, 128, 4096, MlaMode::kAuto, {0.6, 1.7}), MlaMode::kAbsorb);
  EXPECT_EQ(latte::choose_mla_path(hp, 256, 4096, MlaMode::kAuto, {0.6, 1.7}), MlaMode::kNaive);
  EXPECT_EQ(latte::choose_mla_path(hp, 256, 4096, MlaMode::kAuto, {0.6, 1.0}), MlaMode::kAbsorb);
  // The absorbed form's own integer attention (AVX-512 with 32 or more heads, ~1.4x) moves it back.
  EXPECT_EQ(latte::choose_mla_path(hp, 256, 4096, MlaMode::kAuto, {0.6, 1.7, 1.4}), MlaMode::kAbsorb);
  EXPECT_EQ(latte::choose_mla_path(hp, 384, 4096, MlaMode::kAuto, {0.6, 1.7, 1.4}), MlaMode::kNaive);
  EXPECT_EQ(latte::mla_speeds(model, ggl::CpuBackend(1)).latent_gemm, 0.3);  // F32 weights: float path
  EXPECT_EQ(latte::choose_mla_path(hp, 512, 0, MlaMode::kAbsorb), MlaMode::kAbsorb);
  EXPECT_EQ(latte::choose_mla_path(hp, 1, 10, MlaMode::kNaive), MlaMode::kNaive);

  latte::Session s(model, {.n_ctx = 64});
  const auto tokens = fixture_tokens("ds2-v2-tiny-f32");
  s.eval(std::span(tokens).first(20));
  EXPECT_EQ(s.last_mla_path(), MlaMode::kNaive);
  s.eval(std::span(tokens).subspan(20, 1));
  EXPECT_EQ(s.last_mla_path(), MlaMode::kAbsorb);
}

TEST(MlaCache, HoldsOnlyTheLatentAndRopeKeyPerTokenAndLayer) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-f32.gguf");
  const latte::Model model(fixture_path("ds2-v2-tiny-f32"));
  const latte::Hparams& hp = model.hparams();
  const size_t row = static_cast<size_t>(hp.mla.kv_lora_rank + hp.mla.qk_rope);
  const struct {
    ggl::Type type;
    size_t elem;
  } types[] = {{ggl::Type::F32, 4}, {ggl::Type::F16, 2}, {ggl::Type::BF16, 2}};
  for (const auto& t : types) {
    latte::Session s(model, {.n_ctx = 100, .cache_type = t.type});
    EXPECT_EQ(s.cache().bytes_per_token(), static_cast<size_t>(hp.n_layer) * row * t.elem) << ggl::type_name(t.type);
    EXPECT_EQ(s.cache().total_bytes(), s.cache().bytes_per_token() * 100);
    EXPECT_EQ(s.cache().layout().streams, 1);
  }
  latte::Session q(model, {.n_ctx = 10, .cache_type = ggl::Type::Q8_0});
  EXPECT_EQ(q.cache().bytes_per_token(), static_cast<size_t>(hp.n_layer) * row / 32 * 34);
}

TEST(LlamaCache, HoldsKAndVPerKvHead) {
  LATTE_REQUIRE_SHARED("fixtures/llama-gqa-tiny-f32.gguf");
  const latte::Model model(fixture_path("llama-gqa-tiny-f32"));
  const latte::Hparams& hp = model.hparams();
  latte::Session s(model, {.n_ctx = 16, .cache_type = ggl::Type::F16});
  EXPECT_EQ(s.cache().bytes_per_token(),
            static_cast<size_t>(hp.n_layer * hp.n_head_kv * (hp.head_dim_k + hp.head_dim_v)) * 2);
}

// A metadata-only GGUF with DeepSeek-V3's attention geometry.
fs::path write_v3_like_metadata(const fs::path& dir) {
  ggl::GgufWriter w;
  auto& md = w.metadata();
  md.set("general.architecture", {std::string("deepseek2")});
  auto u32 = [&md](const char* k, uint32_t v) { md.set(std::string("deepseek2.") + k, {v}); };
  u32("context_length", 163840);
  u32("embedding_length", 7168);
  u32("block_count", 61);
  u32("feed_forward_length", 18432);
  u32("attention.head_count", 128);
  u32("attention.head_count_kv", 1);
  u32("attention.q_lora_rank", 1536);
  u32("attention.kv_lora_rank", 512);
  u32("attention.key_length", 576);
  u32("attention.value_length", 512);
  u32("attention.key_length_mla", 192);
  u32("attention.value_length_mla", 128);
  u32("rope.dimension_count", 64);
  u32("leading_dense_block_count", 3);
  u32("expert_count", 256);
  u32("expert_used_count", 8);
  u32("expert_shared_count", 1);
  u32("expert_feed_forward_length", 2048);
  u32("vocab_size", 129280);
  const fs::path path = dir / "v3-like.gguf";
  w.write(path.string());
  return path;
}

TEST(CacheFootprint, LatentAgainstPerHeadKvForDeepSeekV3Geometry) {
  const fs::path dir = fs::temp_directory_path() / ("latte-footprint-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const ggl::GgufFile file(write_v3_like_metadata(dir).string());
  const latte::KvCacheFootprint f = latte::kv_cache_footprint(file, ggl::Type::F16);
  EXPECT_EQ(f.hparams.n_head, 128);
  EXPECT_EQ(f.bytes_per_token_and_layer(), 1152u);               // (512 + 64) * 2
  EXPECT_EQ(f.per_head_kv_bytes_per_token_and_layer(), 81920u);  // 128 * (192 + 128) * 2
  EXPECT_EQ(f.bytes_per_token, 61u * 1152u);
  std::printf("[footprint] V3 geometry, f16: %zu vs %zu bytes per token and layer (%.1fx)\n",
              f.bytes_per_token_and_layer(), f.per_head_kv_bytes_per_token_and_layer(),
              static_cast<double>(f.per_head_kv_bytes_per_token) / f.bytes_per_token);
  fs::remove_all(dir);
}

TEST(Session, TruncateReplaysTheSameLogitsAndLastOnlyMatchesAll) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-mini-mla-f32.gguf");
  const latte::Model model(fixture_path("ds2-mini-mla-f32"));
  const auto tokens = fixture_tokens("ds2-mini-mla-f32");
  const size_t V = static_cast<size_t>(model.hparams().n_vocab);
  // One MLA form for both evaluations (auto would expand 60 tokens but absorb 15): the two forms
  // agree only to the integer attention's rounding, and this is about the cache, not the forms.
  // The naive form's kernels give every token the same result in any batch.
  latte::Session s(model, {.n_ctx = 128, .cache_type = ggl::Type::F32, .mla_mode = latte::MlaMode::kNaive});
  const std::span<const int32_t> all(tokens);
  const std::vector<float> full = s.eval(all.first(60));
  EXPECT_EQ(s.n_past(), 60);
  s.truncate(45);
  const std::vector<float> again = s.eval(all.subspan(45, 15));
  const std::vector<float> tail(full.begin() + 45 * V, full.end());
  EXPECT_LE(latte::testing::compare_logits(tail, again, V).nrmse, 1e-6);
  s.clear();
  const std::vector<float> last = s.eval(all.first(60), latte::Logits::kLast);
  ASSERT_EQ(last.size(), V);
  const std::vector<float> last_full(full.end() - V, full.end());
  EXPECT_LE(latte::testing::compare_logits(last_full, last, V).nrmse, 1e-6);
  EXPECT_THROW(s.truncate(61), ggl::Error);
}

TEST(Session, BadTokensAndOverflowLeaveTheSessionUnchanged) {
  LATTE_REQUIRE_SHARED("fixtures/llama-gqa-tiny-f32.gguf");
  const latte::Model model(fixture_path("llama-gqa-tiny-f32"));
  latte::Session s(model, {.n_ctx = 8});
  const std::vector<int32_t> ok = {1, 2, 3};
  s.eval(ok);
  const std::vector<int32_t> bad = {5, static_cast<int32_t>(model.hparams().n_vocab)};
  try {
    s.eval(bad);
    FAIL() << "no error";
  } catch (const ggl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the vocabulary"), std::string::npos) << e.what();
  }
  EXPECT_THROW(s.eval(std::vector<int32_t>{-1}), ggl::Error);
  const std::vector<int32_t> six(6, 1);
  try {
    s.eval(six);
    FAIL() << "no error";
  } catch (const ggl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceed the context of 8"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.n_past(), 3);
}

// Copies a fixture into a new file, letting `edit` drop or reshape tensors or change metadata.
struct TensorEdit {
  std::string drop{};          // tensor to leave out
  std::string reshape{};       // tensor to give a different (same-size) shape
  std::string architecture{};  // replaces general.architecture when set
};

fs::path edited_copy(const std::string& fixture, const TensorEdit& edit, const fs::path& out) {
  const ggl::GgufFile src(fixture_path(fixture));
  ggl::GgufWriter w;
  for (const auto& [key, value] : src.metadata().entries()) w.metadata().set(key, value);
  if (!edit.architecture.empty()) w.metadata().set("general.architecture", {edit.architecture});
  for (const auto& t : src.tensors()) {
    if (t.name == edit.drop) continue;
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    if (t.name == edit.reshape) {  // [a, b] -> [a, b / 2, 2]: same bytes, wrong shape
      ne = {t.ne[0], t.ne[1] / 2, 2};
    }
    w.add_tensor(t.name, t.type, ne, t.data);
  }
  w.write(out.string());
  return out;
}

TEST(ModelLoad, ErrorsNameTheTensorAndTheShapes) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-mini-mla-f32.gguf");
  const fs::path dir = fs::temp_directory_path() / ("latte-load-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto load_error = [&](const TensorEdit& e, const char* file) -> std::string {
    try {
      latte::Model m(edited_copy("ds2-mini-mla-f32", e, dir / file).string());
    } catch (const ggl::Error& err) {
      return err.what();
    }
    return "";
  };
  const std::string missing = load_error({.drop = "blk.1.attn_k_b.weight"}, "missing.gguf");
  EXPECT_NE(missing.find("missing tensor 'blk.1.attn_k_b.weight'"), std::string::npos) << missing;
  EXPECT_NE(missing.find("[128, 512, 2]"), std::string::npos) << missing;
  const std::string shape = load_error({.reshape = "blk.0.attn_q_b.weight"}, "shape.gguf");
  EXPECT_NE(shape.find("'blk.0.attn_q_b.weight' has shape [64, 192, 2], expected [64, 384]"), std::string::npos)
      << shape;
  const std::string arch = load_error({.architecture = "gpt2"}, "arch.gguf");
  EXPECT_NE(arch.find("unsupported architecture 'gpt2'"), std::string::npos) << arch;
  for (const std::string& m : {missing, shape, arch}) EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  fs::remove_all(dir);
}

}  // namespace test_forward_mla
