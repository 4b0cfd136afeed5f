// `latte convert` through the binary on the tiny trained DeepSeek-V2 story model: its Hugging
// Face checkpoint must reproduce the reference GGUFs (tensors byte for byte, metadata key by key),
// give the reference logits and greedy story, and tokenize like the reference; malformed inputs
// must fail with one line, a non-zero exit and no output file.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "ggml-like/gguf/gguf.h"
#include "ggml-like/quant/quant.h"
#include "src/model/model.h"
#include "src/runtime/session.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/logit_metrics.h"
#include "tests/support/convert_support.h"
#include "tests/support/test_support.h"

namespace test_convert_cli {

using namespace latte::convert_test;
using latte::testing::run_latte;
using latte::testing::shared_dir;

const char* kHf = "models/tiny-mla-stories-hf";
const char* kRefF32 = "models/tiny-mla-stories-f32.gguf";
const char* kRefQ8 = "models/tiny-mla-stories-q8_0.gguf";

std::string q(const fs::path& p) { return latte::testing::shell_quoted(p); }

// Converts the shared HF checkpoint once per argument set; returns the output path.
std::string convert_stories(const std::string& args, const std::string& out_name) {
  const fs::path out = fs::path(::testing::TempDir()) / out_name;
  fs::remove(out);
  auto r = run_latte("convert " + q(shared_dir() / kHf) + " -o " + q(out) + " --name tiny-mla-stories " + args);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  // The one-line summary names the file, the tensor count and the peak memory.
  EXPECT_NE(r.out.find("wrote " + out.string()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("peak RSS"), std::string::npos) << r.out;
  return out.string();
}

// Every metadata key of `ref` is in `got` with the same type and value, except `allowed_missing`;
// `got` has no other keys than `allowed_extra`.
void expect_same_metadata(const ggl::GgufFile& got, const ggl::GgufFile& ref,
                          const std::set<std::string>& allowed_missing, const std::set<std::string>& allowed_extra) {
  for (const auto& [key, value] : ref.metadata().entries()) {
    if (allowed_missing.count(key)) continue;
    const ggl::Value* v = got.metadata().find(key);
    ASSERT_NE(v, nullptr) << "missing key " << key;
    EXPECT_TRUE(same_value(*v, value)) << "key " << key << " differs";
  }
  for (const auto& [key, value] : got.metadata().entries()) {
    if (!ref.metadata().has(key)) {
      EXPECT_TRUE(allowed_extra.count(key)) << "unexpected key " << key;
    }
  }
}

void expect_same_tensors(const ggl::GgufFile& got, const ggl::GgufFile& ref) {
  ASSERT_EQ(got.tensors().size(), ref.tensors().size());
  for (size_t i = 0; i < ref.tensors().size(); ++i) {
    const ggl::TensorInfo& a = got.tensors()[i];
    const ggl::TensorInfo& b = ref.tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.type, b.type) << b.name;
    EXPECT_EQ(std::vector<int64_t>(a.ne, a.ne + a.n_dims), std::vector<int64_t>(b.ne, b.ne + b.n_dims)) << b.name;
    ASSERT_EQ(a.nbytes, b.nbytes) << b.name;
    EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0) << b.name << ": bytes differ";
  }
}

TEST(ConvertStories, KvBLayoutF32ReproducesReferenceGguf) {
  LATTE_REQUIRE_SHARED(kHf);
  LATTE_REQUIRE_SHARED(kRefF32);
  ggl::GgufFile got(convert_stories("--type f32 --mla-layout kv_b", "stories-kvb-f32.gguf"));
  ggl::GgufFile ref((shared_dir() / kRefF32).string());
  expect_same_tensors(got, ref);
  // general.description is free text the reference's author added; config.json has none.
  expect_same_metadata(got, ref, {"general.description"}, {});
}

TEST(ConvertStories, KvBLayoutQ8_0ReproducesReferenceGguf) {
  LATTE_REQUIRE_SHARED(kHf);
  LATTE_REQUIRE_SHARED(kRefQ8);
  ggl::GgufFile got(convert_stories("--type q8_0 --mla-layout kv_b", "stories-kvb-q8_0.gguf"));
  ggl::GgufFile ref((shared_dir() / kRefQ8).string());
  expect_same_tensors(got, ref);
  expect_same_metadata(got, ref, {"general.description"}, {"general.quantization_version"});
}

// The default layout splits kv_b per head into k_b (nope block transposed) and v_b.
TEST(ConvertStories, DefaultLayoutSplitsKvBIntoKbAndVb) {
  LATTE_REQUIRE_SHARED(kHf);
  LATTE_REQUIRE_SHARED(kRefF32);
  ggl::GgufFile got(convert_stories("--type f32", "stories-kb-f32.gguf"));
  ggl::GgufFile ref((shared_dir() / kRefF32).string());
  const auto& md = ref.metadata();
  const int64_t n_head = md.get<uint32_t>("deepseek2.attention.head_count");
  const int64_t kv_lora = md.get<uint32_t>("deepseek2.attention.kv_lora_rank");
  const int64_t rope = md.get<uint32_t>("deepseek2.rope.dimension_count");
  const int64_t nope = md.get<uint32_t>("deepseek2.attention.key_length") - rope;
  const int64_t v = md.get<uint32_t>("deepseek2.attention.value_length");
  for (int64_t il = 0; il < md.get<uint32_t>("deepseek2.block_count"); ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    EXPECT_EQ(got.find_tensor(b + "attn_kv_b.weight"), nullptr);
    const ggl::TensorInfo* kv_b = ref.find_tensor(b + "attn_kv_b.weight");
    const ggl::TensorInfo* k_b = got.find_tensor(b + "attn_k_b.weight");
    const ggl::TensorInfo* v_b = got.find_tensor(b + "attn_v_b.weight");
    ASSERT_TRUE(kv_b && k_b && v_b);
    EXPECT_EQ(std::vector<int64_t>(k_b->ne, k_b->ne + 3), (std::vector<int64_t>{nope, kv_lora, n_head}));
    EXPECT_EQ(std::vector<int64_t>(v_b->ne, v_b->ne + 3), (std::vector<int64_t>{kv_lora, v, n_head}));
    const float* src = reinterpret_cast<const float*>(kv_b->data);  // [n_head][nope + v][kv_lora]
    const float* kb = reinterpret_cast<const float*>(k_b->data);    // [n_head][kv_lora][nope]
    const float* vb = reinterpret_cast<const float*>(v_b->data);    // [n_head][v][kv_lora]
    for (int64_t h = 0; h < n_head; ++h)
      for (int64_t c = 0; c < kv_lora; ++c) {
        for (int64_t n = 0; n < nope; ++n)
          ASSERT_EQ(kb[(h * kv_lora + c) * nope + n], src[(h * (nope + v) + n) * kv_lora + c]);
        for (int64_t j = 0; j < v; ++j)
          ASSERT_EQ(vb[(h * v + j) * kv_lora + c], src[(h * (nope + v) + nope + j) * kv_lora + c]);
      }
  }
  // Every other tensor is the reference's.
  for (const ggl::TensorInfo& t : ref.tensors()) {
    if (t.name.find("attn_kv_b") != std::string::npos) continue;
    const ggl::TensorInfo* g = got.find_tensor(t.name);
    ASSERT_NE(g, nullptr) << t.name;
    EXPECT_EQ(std::memcmp(g->data, t.data, t.nbytes), 0) << t.name;
  }
  // The latent geometry moves to the MLA keys.
  EXPECT_EQ(got.metadata().get<uint32_t>("deepseek2.attention.head_count_kv"), 1u);
  EXPECT_EQ(got.metadata().get<uint32_t>("deepseek2.attention.key_length"), kv_lora + rope);
  EXPECT_EQ(got.metadata().get<uint32_t>("deepseek2.attention.value_length"), kv_lora);
  EXPECT_EQ(got.metadata().get<uint32_t>("deepseek2.attention.key_length_mla"), nope + rope);
  EXPECT_EQ(got.metadata().get<uint32_t>("deepseek2.attention.value_length_mla"), v);
}

std::vector<float> eval_all(const std::string& gguf, const std::vector<int32_t>& tokens) {
  latte::Model model(gguf);
  latte::SessionOptions so;
  so.cache_type = ggl::Type::F32;
  latte::Session s(model, so);
  return s.eval(tokens);
}

TEST(ConvertStories, F32LogitsMatchReference) {
  LATTE_REQUIRE_SHARED(kHf);
  LATTE_REQUIRE_SHARED("models/tiny-mla-stories-f32.logits.f32");
  const auto tokens = latte::testing::read_token_file(shared_dir() / "models/tiny-mla-stories.tokens.txt");
  const auto ref = latte::testing::read_f32_file(shared_dir() / "models/tiny-mla-stories-f32.logits.f32");
  for (const char* layout : {"k_b", "kv_b"}) {
    const std::string gguf = convert_stories(std::string("--type f32 --mla-layout ") + layout,
                                             std::string("stories-logits-") + layout + ".gguf");
    auto m = latte::testing::compare_logits(ref, eval_all(gguf, tokens), 512);
    EXPECT_LE(m.nrmse, 1e-3) << layout;
    EXPECT_LE(m.max_kl, 1e-4) << layout;
    EXPECT_EQ(m.top1, 1.0) << layout;
    std::printf("f32 %s: nrmse %.2e max_kl %.2e top1 %.3f\n", layout, m.nrmse, m.max_kl, m.top1);
  }
}

// ../shared/fixtures/README.md's rule for quantized models: measured against the exact result for
// the quantized weights (here: the engine in F32 on the dequantized weights, made by
// `latte quantize ... f32`), be at least as faithful as the oracle engine's logits for the
// reference Q8_0 file (whose tensors this conversion reproduces byte for byte).
TEST(ConvertStories, Q8_0LogitsWithinQuantizedThresholds) {
  LATTE_REQUIRE_SHARED(kHf);
  LATTE_REQUIRE_SHARED("models/tiny-mla-stories-q8_0.logits.f32");
  const auto tokens = latte::testing::read_token_file(shared_dir() / "models/tiny-mla-stories.tokens.txt");
  const auto oracle = latte::testing::read_f32_file(shared_dir() / "models/tiny-mla-stories-q8_0.logits.f32");
  const std::string gguf = convert_stories("--type q8_0", "stories-logits-q8_0.gguf");
  const fs::path dequantized = fs::path(::testing::TempDir()) / "stories-dequantized-f32.gguf";
  auto r = run_latte("quantize " + q(gguf) + " " + q(dequantized) + " f32 --allow-requantize");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto exact = eval_all(dequantized.string(), tokens);
  const auto ours = eval_all(gguf, tokens);
  auto o = latte::testing::compare_logits(exact, oracle, 512);
  auto m = latte::testing::compare_logits(exact, ours, 512);
  EXPECT_LE(m.nrmse, std::max(1.25 * o.nrmse, 0.005));
  EXPECT_LE(m.mean_kl, std::max(1.5 * o.mean_kl, 1e-4));
  std::printf("q8_0 vs exact: nrmse %.2e mean_kl %.2e top1 %.3f (oracle: nrmse %.2e mean_kl %.2e top1 %.3f)\n", m.nrmse,
              m.mean_kl, m.top1, o.nrmse, o.mean_kl, o.top1);

  // The same rule against the unquantized model's reference logits: quantizing the weights may
  // move the result no further from the F32 model than it moved the oracle's own Q8_0 run.
  LATTE_REQUIRE_SHARED("models/tiny-mla-stories-f32.logits.f32");
  const auto f32_ref = latte::testing::read_f32_file(shared_dir() / "models/tiny-mla-stories-f32.logits.f32");
  auto o32 = latte::testing::compare_logits(f32_ref, oracle, 512);
  auto m32 = latte::testing::compare_logits(f32_ref, ours, 512);
  EXPECT_LE(m32.nrmse, std::max(1.25 * o32.nrmse, 0.005));
  EXPECT_LE(m32.mean_kl, std::max(1.5 * o32.mean_kl, 1e-4));
  std::printf("q8_0 vs f32 model: nrmse %.2e mean_kl %.2e top1 %.3f (oracle: nrmse %.2e mean_kl %.2e top1 %.3f)\n",
              m32.nrmse, m32.mean_kl, m32.top1, o32.nrmse, o32.mean_kl, o32.top1);
}

// Greedy decoding, one token at a time after the prompt, as `latte run --temp 0` does.
std::vector<int32_t> greedy(const std::string& gguf, const std::vector<int32_t>& prompt, int n) {
  latte::Model model(gguf);
  latte::SessionOptions so;
  so.cache_type = ggl::Type::F32;
  latte::Session s(model, so);
  std::vector<float> logits = s.eval(prompt, latte::Logits::kLast);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    logits = s.eval({&next, 1}, latte::Logits::kLast);
  }
  return out;
}

TEST(ConvertStories, GreedyStoryIsTheReferenceStory) {
  LATTE_REQUIRE_SHARED(kHf);
  LATTE_REQUIRE_SHARED(kRefF32);
  const std::string gguf = convert_stories("--type f32", "stories-greedy.gguf");
  ggl::GgufFile file(gguf);
  auto tok = latte::Tokenizer::from_gguf(file);
  const auto prompt = tok->encode("Once upon a time", tok->add_bos_default(), false);
  ASSERT_EQ(prompt.front(), tok->bos());
  const auto story = greedy(gguf, prompt, 64);
  EXPECT_EQ(story, greedy((shared_dir() / kRefF32).string(), prompt, 64));
  std::string text;
  for (int32_t id : story) text += tok->token_to_piece(id, false);
  // ../shared/models/README.md: the reference engine's continuation of the prompt.
  EXPECT_EQ(text,
            ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, "
            "red ball with a big ball. She wanted to see what was inside. She as");
}

// The texts of every vocab test file must tokenize identically with the converted tokenizer and
// with the reference GGUF's.
TEST(ConvertStories, TokenizerMatchesReferenceOnVocabTestTexts) {
  LATTE_REQUIRE_SHARED(kHf);
  LATTE_REQUIRE_SHARED(kRefF32);
  const std::string gguf = convert_stories("--type f32", "stories-tokenizer.gguf");
  ggl::GgufFile got(gguf), ref((shared_dir() / kRefF32).string());
  auto a = latte::Tokenizer::from_gguf(got);
  auto b = latte::Tokenizer::from_gguf(ref);
  size_t n = 0;
  for (const char* vocab : {"ggml-vocab-llama-spm", "ggml-vocab-deepseek-llm", "ggml-vocab-gpt-2"}) {
    const std::string inp_rel = "vocab/" + std::string(vocab) + ".gguf.inp";
    LATTE_REQUIRE_SHARED(inp_rel);
    const fs::path inp = shared_dir() / inp_rel;
    for (const std::string& text : read_vocab_texts(inp)) {
      for (bool special : {false, true}) {
        EXPECT_EQ(a->encode(text, false, special), b->encode(text, false, special)) << text;
        EXPECT_EQ(a->encode(text, true, special), b->encode(text, true, special)) << text;
      }
      ++n;
    }
  }
  EXPECT_GT(n, 0u);
}

// A one-layer Llama config.json of 32-wide vectors, for checkpoints made on the spot.
json tiny_llama_config() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"vocab_size", 32},
          {"hidden_size", 32},
          {"intermediate_size", 64},
          {"num_hidden_layers", 1},
          {"num_attention_heads", 2},
          {"num_key_value_heads", 2},
          {"max_position_embeddings", 64},
          {"rms_norm_eps", 1e-5}};
}

// Streaming: converting a 150 MB checkpoint holds about one output tensor (here at most 4 MiB)
// plus the program itself, far less than the checkpoint.
TEST(ConvertStreaming, PeakMemoryStaysFarBelowCheckpointSize) {
  json config = tiny_llama_config();
  config.update({{"vocab_size", 2048},
                 {"hidden_size", 512},
                 {"intermediate_size", 1024},
                 {"num_hidden_layers", 14},
                 {"num_attention_heads", 8},
                 {"num_key_value_heads", 8},
                 {"max_position_embeddings", 256}});
  const fs::path dir = fresh_dir("big") / "llama-150mb";
  {
    HfWeights w = random_llama(config, 11);
    write_checkpoint(dir, config, w, Dtype::F32, 3);
  }
  uint64_t checkpoint_bytes = 0;
  for (const auto& e : fs::directory_iterator(dir)) checkpoint_bytes += fs::file_size(e.path());
  const fs::path out = dir.parent_path() / "out.gguf";
  auto r = run_latte("convert " + q(dir) + " -o " + q(out) + " --type q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const size_t at = r.out.find("peak RSS ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const double mib = std::stod(r.out.substr(at + 9));
  ASSERT_NE(r.out.find("MiB", at), std::string::npos) << r.out;
  std::printf("checkpoint %.1f MiB, peak RSS %.1f MiB\n", checkpoint_bytes / 1048576.0, mib);
  EXPECT_GT(checkpoint_bytes, 140u << 20);
  EXPECT_LT(mib, 40.0) << r.out;
  fs::remove_all(dir.parent_path());  // 300 MB of test files
}

// ---- malformed inputs ----------------------------------------------------------------------

// A writable copy of the shared checkpoint made of symlinks, to break one file at a time.
fs::path linked_copy(const std::string& name) {
  fs::path dir = fresh_dir("bad-" + name);
  for (const auto& e : fs::directory_iterator(shared_dir() / kHf))
    fs::create_symlink(e.path(), dir / e.path().filename());
  return dir;
}

// Runs convert on dir; expects one error line containing `expected`, exit 1 and no output or
// temporary file next to it.
void expect_convert_fails(const fs::path& dir, const std::string& expected, const std::string& extra = "") {
  const fs::path out_dir = fresh_dir("out-" + dir.filename().string());
  const fs::path out = out_dir / "x.gguf";
  auto r = run_latte("convert " + q(dir) + " -o " + q(out) + " " + extra);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_EQ(r.out.rfind("latte convert: error: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(expected), std::string::npos) << "expected '" << expected << "' in: " << r.out;
  EXPECT_TRUE(fs::is_empty(out_dir)) << "output left behind for " << dir;
}

TEST(ConvertErrors, MissingShard) {
  LATTE_REQUIRE_SHARED(kHf);
  fs::path dir = linked_copy("missing-shard");
  fs::remove(dir / "model-00002-of-00002.safetensors");
  expect_convert_fails(dir,
                       "model-00002-of-00002.safetensors: shard listed in model.safetensors.index.json is missing");
}

TEST(ConvertErrors, CorruptSafetensorsHeader) {
  LATTE_REQUIRE_SHARED(kHf);
  fs::path dir = linked_copy("corrupt-header");
  fs::remove(dir / "model-00001-of-00002.safetensors");
  std::string bytes(8, '\0');
  bytes[0] = 20;
  bytes += "{\"a\": [1, 2, oops]}   and then some data";
  std::ofstream(dir / "model-00001-of-00002.safetensors", std::ios::binary) << bytes;
  expect_convert_fails(dir, "model-00001-of-00002.safetensors: safetensors header is not valid JSON");
}

TEST(ConvertErrors, TruncatedSafetensors) {
  LATTE_REQUIRE_SHARED(kHf);
  fs::path dir = linked_copy("truncated");
  fs::remove(dir / "model-00002-of-00002.safetensors");
  std::ifstream in(shared_dir() / kHf / "model-00002-of-00002.safetensors", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir / "model-00002-of-00002.safetensors", std::ios::binary) << all.substr(0, all.size() / 2);
  expect_convert_fails(dir, "are outside the");
}

TEST(ConvertErrors, MissingConfigKey) {
  LATTE_REQUIRE_SHARED(kHf);
  fs::path dir = linked_copy("missing-key");
  json c = read_json(shared_dir() / kHf / "config.json");
  c.erase("kv_lora_rank");
  fs::remove(dir / "config.json");
  std::ofstream(dir / "config.json") << c.dump();
  expect_convert_fails(dir, "config.json: missing key 'kv_lora_rank'");
}

TEST(ConvertErrors, UnknownArchitecture) {
  LATTE_REQUIRE_SHARED(kHf);
  fs::path dir = linked_copy("unknown-arch");
  json c = read_json(shared_dir() / kHf / "config.json");
  c["architectures"] = {"MistralForCausalLM"};
  fs::remove(dir / "config.json");
  std::ofstream(dir / "config.json") << c.dump();
  expect_convert_fails(dir,
                       "unsupported architecture MistralForCausalLM; supported: DeepseekV2ForCausalLM, "
                       "DeepseekV3ForCausalLM, LlamaForCausalLM");
}

TEST(ConvertErrors, ShapeMismatchWithConfig) {
  LATTE_REQUIRE_SHARED(kHf);
  fs::path dir = linked_copy("shape");
  json c = read_json(shared_dir() / kHf / "config.json");
  c["moe_intermediate_size"] = 64;  // the experts are 96 wide
  fs::remove(dir / "config.json");
  std::ofstream(dir / "config.json") << c.dump();
  expect_convert_fails(dir, "has shape [96, 128], but config.json implies [64, 128]");
}

TEST(ConvertErrors, UnsupportedDtype) {
  const json config = tiny_llama_config();
  HfWeights w = random_llama(config, 3);
  fs::path dir = fresh_dir("dtype") / "llama-int";
  write_checkpoint(dir, config, w, Dtype::F32);
  // Relabel one F32 tensor as I32 (same size): the header stays valid, the dtype is not a weight type.
  std::ifstream in(dir / "model.safetensors", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const std::string key = "\"model.norm.weight\":{\"data_offsets\":";
  size_t at = all.find(key);
  ASSERT_NE(at, std::string::npos);
  size_t dt = all.find("\"dtype\":\"F32\"", at);
  ASSERT_NE(dt, std::string::npos);
  all.replace(dt, 13, "\"dtype\":\"I32\"");
  std::ofstream(dir / "model.safetensors", std::ios::binary | std::ios::trunc) << all;
  expect_convert_fails(dir, "tensor 'model.norm.weight' has dtype I32; latte converts F32, F16 and BF16 weights");
}

TEST(ConvertErrors, UnexpectedTensor) {
  const json config = tiny_llama_config();
  HfWeights w = random_llama(config, 3);
  Rng rng(1);
  w.add("model.layers.0.self_attn.q_proj.bias", random_vector(rng, 32, 0, 1));
  fs::path dir = fresh_dir("extra") / "llama-extra";
  write_checkpoint(dir, config, w, Dtype::F32);
  expect_convert_fails(dir, "unexpected tensor 'model.layers.0.self_attn.q_proj.bias'");
}

TEST(ConvertErrors, BadArguments) {
  LATTE_REQUIRE_SHARED(kHf);
  expect_convert_fails(shared_dir() / kHf, "--type 'q5_k' is not one of f32, f16, bf16, q8_0, q4_0, q4_1",
                       "--type q5_k");
  expect_convert_fails(fresh_dir("empty-dir"), "config.json: cannot open");
  expect_convert_fails(fs::path(::testing::TempDir()) / "no-such-dir", "not a directory");
}

}  // namespace test_convert_cli
