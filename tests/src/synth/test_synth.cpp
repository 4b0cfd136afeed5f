// Synthetic models (src/synth): the presets are the published geometries, the files have the
// exact layout of converted checkpoints (checked against the shared fixtures' metadata and
// tensors), they load and evaluate to finite logits, and the weights are reproducible.
#include <gtest/gtest.h>

#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/gguf/gguf.h"
#include "src/model/hparams.h"
#include "src/model/model.h"
#include "src/runtime/session.h"
#include "src/synth/geometry.h"
#include "src/synth/random_weights.h"
#include "src/synth/synth_plan.h"
#include "src/synth/synth_writer.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/test_support.h"

namespace test_synth {

namespace fs = std::filesystem;
using latte::convert::MlaLayout;
using latte::synth::Geometry;

class Synth : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("latte-synth-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const Geometry& g, ggl::Type type, MlaLayout layout, uint64_t seed = 1,
                    const std::string& file = "model.gguf", const std::string& vocab = "") const {
    latte::synth::SynthOptions o;
    o.geometry = g;
    // One type throughout (the fixtures were written so); the mixes are quant_recipe's and test_synth_cli's.
    o.file_type = *latte::convert::file_type_of_base(type);
    o.pure = true;
    o.layout = layout;
    o.output_path = (dir_ / file).string();
    o.vocab_path = vocab;
    o.seed = seed;
    o.progress = false;
    o.on_notice = [](std::string_view n) { ADD_FAILURE() << "unexpected notice: " << n; };
    latte::synth::write_synthetic_model(o);
    return o.output_path;
  }

  fs::path dir_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

int64_t params(const Geometry& g) {
  return latte::synth::parameter_count(latte::synth::plan_tensors(g, MlaLayout::KvB));
}

TEST(SynthPresets, ParameterCountsAreThePublishedOnes) {
  // The totals llama.cpp reports for converted checkpoints (V3 without its MTP layer).
  EXPECT_EQ(params(latte::synth::preset("v2-lite")), 15'706'484'224);
  EXPECT_EQ(params(latte::synth::preset("v2")), 235'741'434'880);
  EXPECT_EQ(params(latte::synth::preset("v3")), 671'026'419'200);
  // The k_b layout holds the same weights, split per head.
  const Geometry lite = latte::synth::preset("v2-lite");
  EXPECT_EQ(latte::synth::parameter_count(latte::synth::plan_tensors(lite, MlaLayout::KbVb)), params(lite));
}

TEST(SynthPresets, V2LiteGeometry) {
  const Geometry g = latte::synth::preset("v2-lite");
  EXPECT_EQ(g.n_embd, 2048);
  EXPECT_EQ(g.n_layer, 27);
  EXPECT_EQ(g.n_head, 16);
  EXPECT_EQ(g.q_lora_rank, 0);
  EXPECT_EQ(g.kv_lora_rank, 512);
  EXPECT_EQ(g.qk_rope, 64);
  EXPECT_EQ(g.qk_nope, 128);
  EXPECT_EQ(g.v_head_dim, 128);
  EXPECT_EQ(g.n_expert, 64);
  EXPECT_EQ(g.n_expert_used, 6);
  EXPECT_EQ(g.n_ff_exp, 1408);
  EXPECT_EQ(g.n_expert_shared, 2);
  EXPECT_EQ(g.n_leading_dense, 1);
  EXPECT_EQ(g.n_ff, 10944);
  EXPECT_EQ(g.n_vocab, 102400);
  EXPECT_EQ(g.yarn_factor, 40.0f);
}

// What synth writes must load in latte for every preset and layer count, including the counts
// that keep only dense layers (V3's first three): the hyperparameters read back agree with the
// tensors planned (a metadata-only file: the big presets' weights would take gigabytes).
TEST(SynthPresets, EveryPresetAndLayerCountGivesHparamsLatteAccepts) {
  const fs::path path = fs::temp_directory_path() / ("latte-synth-hparams-" + std::to_string(::getpid()) + ".gguf");
  for (const std::string& name : latte::synth::preset_names()) {
    for (int64_t layers : {1, 2, 3, 4}) {
      const Geometry g = latte::synth::with_layers(latte::synth::preset(name), layers);
      for (MlaLayout layout : {MlaLayout::KvB, MlaLayout::KbVb}) {
        ggl::GgufWriter w;
        latte::convert::put_str(w.metadata(), "general.architecture", "deepseek2");
        latte::synth::add_hparams(g, layout, w.metadata());
        w.write(path.string());
        const ggl::GgufFile file(path.string());
        latte::Hparams hp;
        ASSERT_NO_THROW(hp = latte::read_hparams(file)) << name << " --layers " << layers;
        int64_t moe_layers = 0;
        for (const auto& t : latte::synth::plan_tensors(g, layout))
          moe_layers += t.name.ends_with("ffn_gate_inp.weight");
        EXPECT_EQ(hp.n_layer - hp.moe.n_leading_dense, moe_layers) << name << " --layers " << layers;
      }
    }
  }
  fs::remove(path);
}

TEST(SynthPresets, LayersShrinkAndUnknownNamesFail) {
  const Geometry g = latte::synth::with_layers(latte::synth::preset("v3"), 2);
  EXPECT_EQ(g.n_layer, 2);
  EXPECT_EQ(g.n_leading_dense, 2);  // V3's first three layers are dense
  const auto tensors = latte::synth::plan_tensors(g, MlaLayout::KvB);
  EXPECT_EQ(tensors.back().name, "blk.1.ffn_down.weight");
  EXPECT_THROW(latte::synth::with_layers(g, 0), ggl::Error);
  try {
    latte::synth::preset("v4");
    ADD_FAILURE();
  } catch (const ggl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown preset 'v4' (known: v2-lite, v2, v3, tiny, tiny-v3)"),
              std::string::npos)
        << e.what();
  }
}

// The geometry of an existing deepseek2 file, to re-create its layout synthetically.
Geometry geometry_of(const ggl::GgufFile& f) {
  const latte::Hparams hp = latte::read_hparams(f);
  Geometry g;
  g.title = "copy";
  g.n_vocab = hp.n_vocab;
  g.n_ctx_train = hp.n_ctx_train;
  g.n_embd = hp.n_embd;
  g.n_layer = hp.n_layer;
  g.n_head = hp.n_head;
  g.q_lora_rank = hp.mla.q_lora_rank;
  g.kv_lora_rank = hp.mla.kv_lora_rank;
  g.qk_nope = hp.mla.qk_nope;
  g.qk_rope = hp.mla.qk_rope;
  g.v_head_dim = hp.mla.v_head_dim;
  g.n_ff = hp.n_ff;
  g.n_leading_dense = hp.moe.n_leading_dense;
  g.n_expert = hp.moe.n_expert;
  g.n_expert_used = hp.moe.n_expert_used;
  g.n_expert_shared = hp.moe.n_expert_shared;
  g.n_ff_exp = hp.moe.n_ff_exp;
  g.gating = hp.moe.gating;
  g.expert_bias = f.find_tensor("blk." + std::to_string(hp.moe.n_leading_dense) + ".exp_probs_b.bias") != nullptr;
  g.weights_norm = hp.moe.weights_norm;
  g.weights_scale = hp.moe.weights_scale;
  g.n_groups = hp.moe.n_groups;
  g.n_groups_used = hp.moe.n_groups_used;
  g.rms_eps = hp.rms_eps;
  g.rope_base = hp.rope.freq_base;
  if (hp.rope.scaling == latte::RopeScaling::kYarn) {
    g.yarn_factor = hp.rope.factor;
    g.yarn_original_ctx = hp.rope.original_context;
  }
  g.yarn_mscale_all_dim = hp.rope.yarn_log_multiplier / 0.1;
  return g;
}

std::string show(const ggl::Value& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>)
          return "'" + x + "'";
        else if constexpr (std::is_same_v<T, ggl::Array>)
          return "[array]";
        else
          return std::to_string(x);
      },
      v.data);
}

struct FixtureCase {
  const char* file;
  ggl::Type type;
  MlaLayout layout;
};

class SynthLayout : public Synth, public ::testing::WithParamInterface<FixtureCase> {};

TEST_P(SynthLayout, SameKeysTensorsShapesAndTypesAsTheFixture) {
  const FixtureCase c = GetParam();
  LATTE_REQUIRE_SHARED(std::string("fixtures/") + c.file);
  const ggl::GgufFile ref((latte::testing::shared_dir() / "fixtures" / c.file).string());
  const ggl::GgufFile mine(write(geometry_of(ref), c.type, c.layout));

  // Every key of the reference, with the same type and value (general.name aside); nothing else
  // but the quantization version, which the reference writer adds only sometimes.
  for (const auto& [key, value] : ref.metadata().entries()) {
    if (key == "general.name") continue;
    const ggl::Value* v = mine.metadata().find(key);
    ASSERT_NE(v, nullptr) << "missing " << key;
    EXPECT_EQ(v->type(), value.type()) << key;
    EXPECT_EQ(show(*v), show(value)) << key;
  }
  for (const auto& [key, value] : mine.metadata().entries())
    EXPECT_TRUE(ref.metadata().has(key) || key == "general.quantization_version") << "extra key " << key;

  ASSERT_EQ(mine.tensors().size(), ref.tensors().size());
  for (const ggl::TensorInfo& t : ref.tensors()) {
    const ggl::TensorInfo* m = mine.find_tensor(t.name);
    ASSERT_NE(m, nullptr) << "missing tensor " << t.name;
    EXPECT_EQ(m->n_dims, t.n_dims) << t.name;
    EXPECT_EQ(std::vector<int64_t>(m->ne, m->ne + 4), std::vector<int64_t>(t.ne, t.ne + 4)) << t.name;
    EXPECT_EQ(m->type, t.type) << t.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SynthLayout,
                         ::testing::Values(FixtureCase{"ds2-lite-27l-q8_0.gguf", ggl::Type::Q8_0, MlaLayout::KvB},
                                           FixtureCase{"ds2-v2-tiny-f32.gguf", ggl::Type::F32, MlaLayout::KvB},
                                           FixtureCase{"ds3-tiny-q4_0.gguf", ggl::Type::Q4_0, MlaLayout::KvB},
                                           FixtureCase{"ds2-mini-mla-f32.gguf", ggl::Type::F32, MlaLayout::KbVb}),
                         [](const auto& info) {
                           std::string n = info.param.file;
                           n = n.substr(0, n.find('.'));
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

void expect_finite_logits(const std::string& path, int64_t n_tokens) {
  const latte::Model model(path);
  latte::Session s(model, {.n_ctx = 64, .cache_type = ggl::Type::F32, .n_threads = 2});
  std::vector<int32_t> tokens;
  for (int64_t i = 0; i < n_tokens; ++i)
    tokens.push_back(static_cast<int32_t>((i * 7919 + 11) % model.hparams().n_vocab));
  const std::vector<float> logits = s.eval(tokens, latte::Logits::kAll);
  double sum = 0, sum2 = 0;
  for (float x : logits) {
    ASSERT_TRUE(std::isfinite(x)) << path;
    sum += x;
    sum2 += static_cast<double>(x) * x;
  }
  const double n = static_cast<double>(logits.size());
  const double sd = std::sqrt(sum2 / n - (sum / n) * (sum / n));
  // Unit-scale logits: neither collapsed nor blown up.
  EXPECT_GT(sd, 0.1) << path;
  EXPECT_LT(sd, 10.0) << path;
}

TEST_F(Synth, TinyModelsLoadAndGiveFiniteLogits) {
  const Geometry tiny = latte::synth::preset("tiny"), tiny_v3 = latte::synth::preset("tiny-v3");
  expect_finite_logits(write(tiny, ggl::Type::Q8_0, MlaLayout::KvB, 1, "a.gguf"), 12);
  expect_finite_logits(write(tiny, ggl::Type::Q4_0, MlaLayout::KbVb, 1, "b.gguf"), 12);
  expect_finite_logits(write(tiny_v3, ggl::Type::Q4_0, MlaLayout::KvB, 1, "c.gguf"), 12);
  expect_finite_logits(write(tiny_v3, ggl::Type::F16, MlaLayout::KbVb, 1, "d.gguf"), 12);
}

TEST_F(Synth, DeepStacksStayFinite) {
  // Sixty layers (V2's depth) of the V3-flavoured tiny model: activations must not run away.
  expect_finite_logits(
      write(latte::synth::with_layers(latte::synth::preset("tiny-v3"), 60), ggl::Type::Q8_0, MlaLayout::KvB), 6);
}

TEST_F(Synth, SeededAndIndependentOfTheThreadCount) {
  const Geometry g = latte::synth::preset("tiny");
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::string one = slurp(write(g, ggl::Type::F16, MlaLayout::KvB, 7, "one.gguf"));
  omp_set_num_threads(std::max(2, threads));
  const std::string many = slurp(write(g, ggl::Type::F16, MlaLayout::KvB, 7, "many.gguf"));
  omp_set_num_threads(threads);
  const std::string other = slurp(write(g, ggl::Type::F16, MlaLayout::KvB, 8, "other.gguf"));
  EXPECT_EQ(one, many);
  EXPECT_NE(one, other);
  EXPECT_EQ(one.size(), other.size());
}

TEST(SynthRandom, ScalesFollowTheInitRule) {
  latte::synth::SynthTensor m{"blk.0.ffn_down_exps.weight", {1408, 64}, latte::synth::WeightInit::kMatrix, 1408};
  latte::synth::SynthTensor n{"blk.0.attn_norm.weight", {2048}, latte::synth::WeightInit::kNorm, 1};
  std::vector<float> rows(1408 * 64), norm(2048);
  latte::synth::RandomWeights(3, m).fill(0, 64, rows.data());
  latte::synth::RandomWeights(3, n).fill(0, 1, norm.data());
  double sum = 0, sum2 = 0;
  for (float x : rows) {
    sum += x;
    sum2 += static_cast<double>(x) * x;
  }
  const double count = static_cast<double>(rows.size());
  EXPECT_NEAR(sum / count, 0.0, 0.002);
  EXPECT_NEAR(std::sqrt(sum2 / count), 1.0 / std::sqrt(1408.0), 0.001);  // 0.02665
  for (float x : norm) {
    EXPECT_GT(x, 0.9f);
    EXPECT_LT(x, 1.1f);
  }
  // Rows drawn alone equal rows drawn in a block.
  std::vector<float> row5(1408);
  latte::synth::RandomWeights(3, m).fill(5, 1, row5.data());
  EXPECT_EQ(std::vector<float>(rows.begin() + 5 * 1408, rows.begin() + 6 * 1408), row5);
}

TEST_F(Synth, VocabularyIsCopiedAndTokenizes) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-deepseek-llm.gguf");
  const std::string vocab = (latte::testing::shared_dir() / "vocab/ggml-vocab-deepseek-llm.gguf").string();
  const std::string path = write(latte::synth::preset("tiny"), ggl::Type::Q8_0, MlaLayout::KvB, 1, "v.gguf", vocab);
  const ggl::GgufFile file(path);
  EXPECT_EQ(file.metadata().get<std::string>("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(file.metadata().get<std::string>("tokenizer.ggml.pre"), "deepseek-llm");
  const ggl::GgufFile ref(vocab);
  const auto mine = latte::Tokenizer::from_gguf(file), theirs = latte::Tokenizer::from_gguf(ref);
  const std::string text = "Hello world, synthetic DeepSeek!";
  EXPECT_EQ(mine->encode(text, true, false), theirs->encode(text, true, false));
  expect_finite_logits(path, 4);
}

// V3's embedding has 129280 rows, the DeepSeek LLM vocabulary 102400 tokens: the vocabulary is
// padded as llama.cpp's converter pads one ([PAD<i>] tokens of type UNUSED), and tokenizes as before.
TEST_F(Synth, VocabularySmallerThanTheEmbeddingIsPadded) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-deepseek-llm.gguf");
  const std::string vocab = (latte::testing::shared_dir() / "vocab/ggml-vocab-deepseek-llm.gguf").string();
  const std::string path = write(latte::synth::preset("tiny-v3"), ggl::Type::Q8_0, MlaLayout::KvB, 1, "p.gguf", vocab);
  const ggl::GgufFile file(path);
  const auto& tokens = std::get<ggl::Array>(file.metadata().find("tokenizer.ggml.tokens")->data).items;
  const auto& types = std::get<ggl::Array>(file.metadata().find("tokenizer.ggml.token_type")->data).items;
  ASSERT_EQ(tokens.size(), 129280u);
  ASSERT_EQ(types.size(), 129280u);
  EXPECT_EQ(std::get<std::string>(tokens[102400].data), "[PAD102400]");
  EXPECT_EQ(std::get<std::string>(tokens[129279].data), "[PAD129279]");
  EXPECT_EQ(std::get<int32_t>(types[129279].data), 5);
  const ggl::GgufFile ref(vocab);
  EXPECT_EQ(std::get<std::string>(tokens[102399].data),
            std::get<std::string>(
                std::get<ggl::Array>(ref.metadata().find("tokenizer.ggml.tokens")->data).items[102399].data));
  const std::string text = "Hello world, synthetic DeepSeek-V3!";
  EXPECT_EQ(latte::Tokenizer::from_gguf(file)->encode(text, true, false),
            latte::Tokenizer::from_gguf(ref)->encode(text, true, false));
  expect_finite_logits(path, 4);
}

TEST_F(Synth, VocabularyLargerThanTheModelIsRefused) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-deepseek-llm.gguf");
  const std::string vocab = (latte::testing::shared_dir() / "vocab/ggml-vocab-deepseek-llm.gguf").string();
  ggl::Metadata md;
  try {
    latte::synth::copy_tokenizer(vocab, 1000, md);
    ADD_FAILURE() << "no error";
  } catch (const ggl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the vocabulary has 102400 tokens but the model's is 1000"), std::string::npos)
        << e.what();
  }
}

}  // namespace test_synth
