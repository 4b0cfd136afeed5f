// The per-tensor type choice of llama.cpp's file types (convert/quant_recipe.h): the reference
// quantizer's files in ../shared/fixtures/kquant tensor for tensor, and the mixes' rules on
// Llama-shaped models (layer patterns, fallbacks, overrides, --pure).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "convert/quant_recipe.h"
#include "ggml-like/core/error.h"
#include "ggml-like/gguf/gguf.h"
#include "tests/support/test_support.h"

namespace test_quant_recipe {

using ggl::Type;
using latte::convert::choose_tensor_types;
using latte::convert::FileType;
using latte::convert::find_file_type;
using latte::convert::RecipeModel;
using latte::convert::RecipeOptions;
using latte::convert::RecipeTensor;
using latte::testing::shared_dir;

const char* kKquantDir = "fixtures/kquant";

std::vector<RecipeTensor> tensors_of(const ggl::GgufFile& f) {
  std::vector<RecipeTensor> out;
  for (const ggl::TensorInfo& t : f.tensors()) out.push_back({t.name, std::vector<int64_t>(t.ne, t.ne + t.n_dims)});
  return out;
}

std::map<std::string, Type> choose(const std::string& ftype, const RecipeModel& m, const std::vector<RecipeTensor>& ts,
                                   const RecipeOptions& o = {}) {
  const auto choices = choose_tensor_types(*find_file_type(ftype), m, ts, o);
  std::map<std::string, Type> out;
  for (size_t i = 0; i < ts.size(); ++i) out[ts[i].name] = choices[i].type;
  return out;
}

class KquantFixtureTypes : public ::testing::TestWithParam<const char*> {};

// Known answer 1, types: every tensor of kq-tiny-TYPE.gguf has the type the recipe picks for the
// F32 model, and general.file_type is llama.cpp's id of TYPE.
TEST_P(KquantFixtureTypes, EveryTensorGetsTheReferenceType) {
  const std::string type = GetParam();
  const std::string f32 = std::string(kKquantDir) + "/kq-tiny-f32.gguf";
  const std::string ref_path = std::string(kKquantDir) + "/kq-tiny-" + type + ".gguf";
  LATTE_REQUIRE_SHARED(f32);
  LATTE_REQUIRE_SHARED(ref_path);
  const ggl::GgufFile in((shared_dir() / f32).string()), ref((shared_dir() / ref_path).string());
  const RecipeModel model = RecipeModel::from_metadata(in.metadata(), in.path());
  const std::vector<RecipeTensor> ts = tensors_of(in);
  const auto got = choose(type, model, ts);
  ASSERT_EQ(ref.tensors().size(), ts.size());
  std::set<Type> seen;
  for (const ggl::TensorInfo& t : ref.tensors()) {
    ASSERT_TRUE(got.count(t.name)) << t.name;
    EXPECT_EQ(ggl::type_name(got.at(t.name)), ggl::type_name(t.type)) << type << ": " << t.name;
    seen.insert(t.type);
  }
  EXPECT_EQ(find_file_type(type)->id, ref.metadata().get<uint32_t>("general.file_type"));
  // The fixture exercises the fallback: a file of one type holds at least F32, the base and one other.
  if (type != "iq4_nl" && type != "q5_0" && type != "q5_1") {
    EXPECT_GE(seen.size(), 3u) << type;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KquantFixtureTypes,
                         ::testing::Values("q2_k", "q3_k_m", "q4_k_s", "q4_k_m", "q5_k_m", "q6_k", "iq4_xs", "iq4_nl",
                                           "q5_0", "q5_1"));

// The same for llama.cpp's i-quant files below 4 bits (fixtures/iquant), made with an importance
// matrix: the plan needs only the types' names and block sizes, so it is checked whether or not
// this build quantizes them.
class IquantFixtureTypes : public ::testing::TestWithParam<const char*> {};

TEST_P(IquantFixtureTypes, EveryTensorGetsTheReferenceType) {
  const std::string type = GetParam();
  const std::string f32 = std::string(kKquantDir) + "/kq-tiny-f32.gguf";
  const std::string ref_path = "fixtures/iquant/kq-tiny-" + type + ".gguf";
  LATTE_REQUIRE_SHARED(f32);
  LATTE_REQUIRE_SHARED(ref_path);
  const ggl::GgufFile in((shared_dir() / f32).string()), ref((shared_dir() / ref_path).string());
  const RecipeModel model = RecipeModel::from_metadata(in.metadata(), in.path());
  const std::vector<RecipeTensor> ts = tensors_of(in);
  RecipeOptions o;
  o.has_imatrix = true;
  const auto got = choose(type, model, ts, o);
  ASSERT_EQ(ref.tensors().size(), ts.size());
  for (const ggl::TensorInfo& t : ref.tensors()) {
    ASSERT_TRUE(got.count(t.name)) << t.name;
    EXPECT_EQ(ggl::type_name(got.at(t.name)), ggl::type_name(t.type)) << type << ": " << t.name;
  }
  EXPECT_EQ(find_file_type(type)->id, ref.metadata().get<uint32_t>("general.file_type"));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, IquantFixtureTypes,
                         ::testing::Values("iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq2_m", "iq3_xxs", "iq3_xs",
                                           "iq3_s", "iq3_m"));

// A Llama-shaped model: n_layer layers of attn_q/k/v/output and ffn_gate/up/down (rows of 4096 or
// 11008), norms, embeddings, optionally without output.weight (tied embeddings).
std::vector<RecipeTensor> llama_tensors(int n_layer, bool with_output, int64_t n_ff = 11008) {
  std::vector<RecipeTensor> ts = {{"token_embd.weight", {4096, 32000}}, {"output_norm.weight", {4096}}};
  if (with_output) ts.push_back({"output.weight", {4096, 32000}});
  for (int i = 0; i < n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    for (const char* n : {"attn_q", "attn_output"}) ts.push_back({b + n + ".weight", {4096, 4096}});
    for (const char* n : {"attn_k", "attn_v"}) ts.push_back({b + n + ".weight", {4096, 1024}});
    for (const char* n : {"ffn_gate", "ffn_up"}) ts.push_back({b + n + ".weight", {4096, n_ff}});
    ts.push_back({b + "ffn_down.weight", {n_ff, 4096}});
    for (const char* n : {"attn_norm", "ffn_norm"}) ts.push_back({b + n + ".weight", {4096}});
  }
  return ts;
}

RecipeModel llama_model(int n_layer, int n_head = 32, int n_head_kv = 8, int n_expert = 0) {
  RecipeModel m;
  m.arch = "llama";
  m.n_layer = n_layer;
  m.n_head = n_head;
  m.n_head_kv = n_head_kv;
  m.n_expert = n_expert;
  return m;
}

std::string blk(int i, const char* name) { return "blk." + std::to_string(i) + "." + name + ".weight"; }

// llama.cpp's use_more_bits over 32 layers, written out: the first and last 4, and 6, 9, ..., 27.
const std::set<int> kMoreBits32 = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31};

TEST(QuantRecipe, Q4_K_M_GivesMoreBitsInTheUseMoreBitsLayers) {
  const auto ts = llama_tensors(32, true);
  const auto got = choose("Q4_K_M", llama_model(32), ts);  // case-insensitive
  EXPECT_EQ(got.at("output.weight"), Type::Q6_K);
  EXPECT_EQ(got.at("token_embd.weight"), Type::Q4_K);
  EXPECT_EQ(got.at("output_norm.weight"), Type::F32);
  for (int i = 0; i < 32; ++i) {
    const Type more = kMoreBits32.count(i) ? Type::Q6_K : Type::Q4_K;
    EXPECT_EQ(got.at(blk(i, "attn_v")), more) << i;
    EXPECT_EQ(got.at(blk(i, "ffn_down")), more) << i;
    EXPECT_EQ(got.at(blk(i, "attn_q")), Type::Q4_K) << i;
    EXPECT_EQ(got.at(blk(i, "attn_k")), Type::Q4_K) << i;
    EXPECT_EQ(got.at(blk(i, "attn_output")), Type::Q4_K) << i;
    EXPECT_EQ(got.at(blk(i, "ffn_up")), Type::Q4_K) << i;
  }
}

TEST(QuantRecipe, OtherMixes) {
  const auto ts = llama_tensors(32, true);
  const RecipeModel m = llama_model(32);
  auto q3m = choose("q3_k_m", m, ts), q3l = choose("q3_k_l", m, ts), q3s = choose("q3_k_s", m, ts);
  auto q4s = choose("q4_k_s", m, ts), q5m = choose("q5_k_m", m, ts), q5s = choose("q5_k_s", m, ts);
  auto q2 = choose("q2_k", m, ts), q6 = choose("q6_k", m, ts), iq4 = choose("iq4_xs", m, ts);
  for (int i = 0; i < 32; ++i) {
    // Q3_K_M: the first two attn_v Q5_K then Q4_K; ffn_down Q5_K in the first 32/16 = 2 layers, else Q4_K.
    EXPECT_EQ(q3m.at(blk(i, "attn_v")), i < 2 ? Type::Q5_K : Type::Q4_K) << i;
    EXPECT_EQ(q3m.at(blk(i, "ffn_down")), i < 2 ? Type::Q5_K : Type::Q4_K) << i;
    EXPECT_EQ(q3m.at(blk(i, "attn_output")), Type::Q4_K) << i;
    EXPECT_EQ(q3m.at(blk(i, "ffn_up")), Type::Q3_K) << i;
    EXPECT_EQ(q3l.at(blk(i, "attn_v")), Type::Q5_K) << i;
    EXPECT_EQ(q3l.at(blk(i, "ffn_down")), Type::Q5_K) << i;
    EXPECT_EQ(q3l.at(blk(i, "attn_output")), Type::Q5_K) << i;
    EXPECT_EQ(q3s.at(blk(i, "attn_v")), Type::Q3_K) << i;
    EXPECT_EQ(q3s.at(blk(i, "ffn_down")), Type::Q3_K) << i;
    // Q4_K_S: attn_v Q5_K in the first four, ffn_down Q5_K in the first 32/8 = 4 layers.
    EXPECT_EQ(q4s.at(blk(i, "attn_v")), i < 4 ? Type::Q5_K : Type::Q4_K) << i;
    EXPECT_EQ(q4s.at(blk(i, "ffn_down")), i < 4 ? Type::Q5_K : Type::Q4_K) << i;
    EXPECT_EQ(q5m.at(blk(i, "attn_v")), kMoreBits32.count(i) ? Type::Q6_K : Type::Q5_K) << i;
    EXPECT_EQ(q5m.at(blk(i, "ffn_down")), kMoreBits32.count(i) ? Type::Q6_K : Type::Q5_K) << i;
    EXPECT_EQ(q5s.at(blk(i, "attn_v")), Type::Q5_K) << i;
    // Q2_K: attn_v Q4_K with 4 query heads per KV head (Q3_K below), ffn_down and attn_output Q3_K.
    EXPECT_EQ(q2.at(blk(i, "attn_v")), Type::Q4_K) << i;
    EXPECT_EQ(q2.at(blk(i, "ffn_down")), Type::Q3_K) << i;
    EXPECT_EQ(q2.at(blk(i, "attn_output")), Type::Q3_K) << i;
    EXPECT_EQ(q2.at(blk(i, "attn_q")), Type::Q2_K) << i;
    EXPECT_EQ(q6.at(blk(i, "ffn_down")), Type::Q6_K) << i;
    // IQ4_XS without an imatrix: ffn_down Q5_K in the first eighth; attn_v Q5_K with n_gqa >= 4.
    EXPECT_EQ(iq4.at(blk(i, "ffn_down")), i < 4 ? Type::Q5_K : Type::IQ4_XS) << i;
    EXPECT_EQ(iq4.at(blk(i, "attn_v")), Type::Q5_K) << i;
  }
  EXPECT_EQ(choose("q2_k", llama_model(32, 32, 32), ts).at(blk(0, "attn_v")), Type::Q3_K);
  EXPECT_EQ(choose("iq4_xs", llama_model(32, 32, 32), ts).at(blk(0, "attn_v")), Type::IQ4_XS);
  // With an importance matrix the IQ4 ffn_down bump goes, and Q4_0/Q5_0 put the first eighth in Q4_1/Q5_1.
  RecipeOptions with_imatrix;
  with_imatrix.has_imatrix = true;
  EXPECT_EQ(choose("iq4_xs", m, ts, with_imatrix).at(blk(0, "ffn_down")), Type::IQ4_XS);
  EXPECT_EQ(choose("q4_0", m, ts, with_imatrix).at(blk(3, "ffn_down")), Type::Q4_1);
  EXPECT_EQ(choose("q4_0", m, ts, with_imatrix).at(blk(4, "ffn_down")), Type::Q4_0);
  EXPECT_EQ(choose("q5_0", m, ts, with_imatrix).at(blk(0, "ffn_down")), Type::Q5_1);
  EXPECT_EQ(choose("q4_0", m, ts).at(blk(0, "ffn_down")), Type::Q4_0);
}

TEST(QuantRecipe, OutputAndTiedEmbeddings) {
  const RecipeModel m = llama_model(8);
  for (const char* t : {"q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k_m", "q4_k_m", "iq4_nl", "iq4_xs"}) {
    EXPECT_EQ(choose(t, m, llama_tensors(8, true)).at("output.weight"), Type::Q6_K) << t;
    // Without output.weight the embedding doubles as the output and gets its type.
    EXPECT_EQ(choose(t, m, llama_tensors(8, false)).at("token_embd.weight"), Type::Q6_K) << t;
  }
  EXPECT_EQ(choose("q8_0", m, llama_tensors(8, true)).at("output.weight"), Type::Q8_0);
  for (const char* t : {"f32", "f16", "bf16"})
    EXPECT_EQ(choose(t, m, llama_tensors(8, true)).at("output.weight"), *ggl::type_from_name(t)) << t;
  // Rows that the base type's blocks do not divide: Q8_0 for the output.
  std::vector<RecipeTensor> odd = {{"output.weight", {4000, 100}}, {"token_embd.weight", {4000, 100}}};
  EXPECT_EQ(choose("q4_k_m", m, odd).at("output.weight"), Type::Q8_0);
}

TEST(QuantRecipe, MixtralAndSeventyB) {
  const auto ts = llama_tensors(32, true, 14336);
  const auto mixtral = choose("q4_k_m", llama_model(32, 32, 8, 8), ts);
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(mixtral.at(blk(i, "attn_v")), Type::Q8_0) << i;
    EXPECT_EQ(mixtral.at(blk(i, "attn_k")), Type::Q8_0) << i;
    EXPECT_EQ(mixtral.at(blk(i, "attn_output")), Type::Q5_K) << i;
  }
  const auto ts80 = llama_tensors(80, true, 28672);
  const auto b70 = choose("q3_k_m", llama_model(80, 64, 8), ts80);
  for (int i = 0; i < 80; ++i) EXPECT_EQ(b70.at(blk(i, "attn_v")), Type::Q5_K) << i;
  const auto b65 = choose("q3_k_m", llama_model(80, 64, 64), ts80);
  EXPECT_EQ(b65.at(blk(5, "attn_v")), Type::Q4_K);
}

TEST(QuantRecipe, FallbackForRowsTheBlocksDoNotDivide) {
  const RecipeModel m = llama_model(8);
  struct Case {
    const char* ftype;
    Type expect;
  };
  // Rows of 128 (q_lora) and of 1408 (V2-Lite experts): 32-multiples, not 256-multiples.
  for (int64_t ne0 : {128, 1408})
    for (const Case& c : {Case{"q2_k", Type::IQ4_NL}, Case{"q3_k_s", Type::IQ4_NL}, Case{"q4_k_s", Type::Q5_0},
                          Case{"q5_k_s", Type::Q5_1}, Case{"q6_k", Type::Q8_0}, Case{"iq4_xs", Type::IQ4_NL}}) {
      const std::vector<RecipeTensor> ts = {{"blk.0.attn_q_b.weight", {ne0, 64}}};
      const auto choices = choose_tensor_types(*find_file_type(c.ftype), m, ts, {});
      EXPECT_EQ(choices[0].type, c.expect) << c.ftype << " " << ne0;
      EXPECT_NE(choices[0].notice.find("rows of " + std::to_string(ne0) + " are not a multiple of 256"),
                std::string::npos)
          << choices[0].notice;
    }
  // Rows of 48 fit no 32-block type: F16.
  const std::vector<RecipeTensor> ts = {{"blk.0.ffn_up.weight", {48, 64}}};
  for (const char* t : {"q4_k_m", "q8_0", "q4_0", "iq4_nl"})
    EXPECT_EQ(choose_tensor_types(*find_file_type(t), m, ts, {})[0].type, Type::F16) << t;
  // --pure: no fallback, an error.
  RecipeOptions pure;
  pure.pure = true;
  try {
    choose_tensor_types(*find_file_type("q4_k_m"), m, {{"blk.0.attn_q_b.weight", {128, 64}}}, pure);
    ADD_FAILURE() << "no error";
  } catch (const ggl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--pure forbids"), std::string::npos) << e.what();
  }
}

TEST(QuantRecipe, PureAndOverrides) {
  const auto ts = llama_tensors(8, true);
  const RecipeModel m = llama_model(8);
  RecipeOptions pure;
  pure.pure = true;
  for (const auto& [name, type] : choose("q4_k_m", m, ts, pure))
    EXPECT_EQ(type, name.find("norm") != std::string::npos ? Type::F32 : Type::Q4_K) << name;

  RecipeOptions o;
  o.tensor_types.push_back(latte::convert::parse_tensor_type_override("ATTN_V=q8_0"));  // lower-cased
  o.tensor_types.push_back(latte::convert::parse_tensor_type_override("blk\\.[0-3]\\.ffn_.*=q5_k"));
  o.tensor_types.push_back(latte::convert::parse_tensor_type_override("ffn_gate=q2_k"));
  o.output_tensor_type = Type::Q8_0;
  o.token_embedding_type = Type::Q5_K;
  const auto got = choose("q4_k_m", m, ts, o);
  EXPECT_EQ(got.at("output.weight"), Type::Q8_0);
  EXPECT_EQ(got.at("token_embd.weight"), Type::Q5_K);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(got.at(blk(i, "attn_v")), Type::Q8_0) << i;
    EXPECT_EQ(got.at(blk(i, "ffn_up")), i < 4 ? Type::Q5_K : Type::Q4_K) << i;
    EXPECT_EQ(got.at(blk(i, "ffn_gate")), i < 4 ? Type::Q5_K : Type::Q2_K) << i;  // first match wins
  }
  // Explicit types that do not fit are errors, not silent fallbacks.
  RecipeOptions bad;
  bad.output_tensor_type = Type::Q4_K;
  EXPECT_THROW(choose("q8_0", m, {{"output.weight", {4000, 8}}}, bad), ggl::Error);
  EXPECT_THROW(latte::convert::parse_tensor_type_override("attn_v"), ggl::Error);
  EXPECT_THROW(latte::convert::parse_tensor_type_override("attn_v=q9_k"), ggl::Error);
  EXPECT_THROW(latte::convert::parse_tensor_type_override("attn_v[=q8_0"), ggl::Error);
}

// llama.cpp counts attn_v tensors in its own order (by layer, then name), not the file's.
TEST(QuantRecipe, ChoicesDoNotDependOnTheFileOrder) {
  auto ts = llama_tensors(16, true);
  const auto want = choose("q3_k_m", llama_model(16), ts);
  std::mt19937 rng(7);
  std::shuffle(ts.begin(), ts.end(), rng);
  EXPECT_EQ(choose("q3_k_m", llama_model(16), ts), want);
  EXPECT_EQ(want.at(blk(1, "attn_v")), Type::Q5_K);
  EXPECT_EQ(want.at(blk(2, "attn_v")), Type::Q4_K);
  EXPECT_EQ(want.at(blk(10, "attn_v")), Type::Q4_K);
}

TEST(QuantRecipe, FileTypeNames) {
  const std::map<std::string, uint32_t> ids = {
      {"f32", 0},     {"f16", 1},      {"q4_0", 2},    {"q4_1", 3},    {"q8_0", 7},     {"q5_0", 8},
      {"q5_1", 9},    {"q2_k", 10},    {"q3_k_s", 11}, {"q3_k_m", 12}, {"q3_k_l", 13},  {"q4_k_s", 14},
      {"q4_k_m", 15}, {"q5_k_s", 16},  {"q5_k_m", 17}, {"q6_k", 18},   {"iq4_nl", 25},  {"iq4_xs", 30},
      {"bf16", 32},   {"iq2_xxs", 19}, {"iq2_xs", 20}, {"iq3_xs", 22}, {"iq3_xxs", 23}, {"iq1_s", 24},
      {"iq3_s", 26},  {"iq3_m", 27},   {"iq2_s", 28},  {"iq2_m", 29},  {"iq1_m", 31}};
  for (const auto& [name, id] : ids) {
    ASSERT_TRUE(find_file_type(name)) << name;
    EXPECT_EQ(find_file_type(name)->id, id) << name;
    std::string upper = name;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_TRUE(find_file_type(upper)) << upper;
  }
  for (const char* bad : {"q4_k", "q5_k", "iq3_k", "tq1_0", "", "q4_k_m "}) EXPECT_FALSE(find_file_type(bad)) << bad;
}

// DeepSeek's MLA tensors: attn_kv_b (and the k_b/v_b split) get the base type in every mix, the
// experts' ffn_down follow the layer pattern by the layer in their name.
TEST(QuantRecipe, DeepseekLayout) {
  RecipeModel m;
  m.arch = "deepseek2";
  m.n_layer = 27;
  m.n_expert = 64;
  m.n_head = 16;
  m.n_head_kv = 16;
  std::vector<RecipeTensor> ts = {{"token_embd.weight", {2048, 102400}}, {"output.weight", {2048, 102400}}};
  for (int i = 0; i < 27; ++i) {
    ts.push_back({blk(i, "attn_kv_b"), {512, 4096}});
    ts.push_back({blk(i, "attn_k_b"), {128, 512, 16}});
    ts.push_back({blk(i, "attn_v_b"), {512, 128, 16}});
    ts.push_back({blk(i, "ffn_gate_inp"), {2048, 64}});
    ts.push_back({blk(i, "ffn_down_exps"), {1408, 2048, 64}});
    ts.push_back({blk(i, "ffn_down_shexp"), {2816, 2048}});
  }
  const auto got = choose("q4_k_m", m, ts);
  for (int i = 0; i < 27; ++i) {
    EXPECT_EQ(got.at(blk(i, "attn_kv_b")), Type::Q4_K) << i;
    EXPECT_EQ(got.at(blk(i, "attn_k_b")), Type::Q5_0) << i;  // rows of 128
    EXPECT_EQ(got.at(blk(i, "attn_v_b")), Type::Q4_K) << i;
    EXPECT_EQ(got.at(blk(i, "ffn_gate_inp")), Type::F32) << i;
    // use_more_bits over 27 layers: i < 3, i >= 23, (i - 3) % 3 == 2. Rows of 1408 fall back Q6_K -> Q8_0.
    const bool more = i < 3 || i >= 23 || (i - 3) % 3 == 2;
    EXPECT_EQ(got.at(blk(i, "ffn_down_exps")), more ? Type::Q8_0 : Type::Q5_0) << i;
    EXPECT_EQ(got.at(blk(i, "ffn_down_shexp")), more ? Type::Q6_K : Type::Q4_K) << i;
  }
}

}  // namespace test_quant_recipe
