// Tokenizer conversion: tokenizer.json files rebuilt from the shared vocabulary GGUFs the way
// Hugging Face exports them (byte-level BPE for DeepSeek LLM and GPT-2; SentencePiece BPE with
// byte fallback and merges derived from the piece scores for Llama) must convert back to the
// same GGUF vocabulary and tokenize every shared test vector exactly.
#include <gtest/gtest.h>

#include <fstream>

#include "convert/hf_tokenizer.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/convert_support.h"
#include "tests/support/test_support.h"

namespace test_convert_tokenizer {

using namespace latte::convert_test;
using latte::convert::JsonObject;
using latte::testing::shared_dir;

// (Each regex stays one literal, as in the file.)
// clang-format off
// The pre-tokenizer Split regexes of DeepSeek LLM's tokenizer.json.
const std::vector<std::string> kDeepSeekLlmSplits = {
    "[\r\n]",
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-"
    "ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
    "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
    "\\s+$",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}+",
};
// clang-format on

json split(const std::string& regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

json added_token(int64_t id, const std::string& content, bool special) {
  return {{"id", id},        {"content", content},     {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", !special}, {"special", special}};
}

struct VocabFile {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<float> scores;
  std::vector<std::string> merges;
  std::unique_ptr<ggl::GgufFile> file;
};

VocabFile load_vocab(const std::string& name) {
  VocabFile v;
  v.file = std::make_unique<ggl::GgufFile>((shared_dir() / "vocab" / (name + ".gguf")).string());
  const ggl::Metadata& md = v.file->metadata();
  v.tokens = md.get<std::vector<std::string>>("tokenizer.ggml.tokens");
  v.types = md.get<std::vector<int32_t>>("tokenizer.ggml.token_type");
  if (md.has("tokenizer.ggml.scores")) v.scores = md.get<std::vector<float>>("tokenizer.ggml.scores");
  if (md.has("tokenizer.ggml.merges")) v.merges = md.get<std::vector<std::string>>("tokenizer.ggml.merges");
  return v;
}

// Converts the tokenizer files in dir; returns the metadata.
ggl::Metadata convert_dir(const fs::path& dir, int64_t n_vocab, std::string* description = nullptr) {
  ggl::Metadata md("converted");
  JsonObject config("config.json", json{{"vocab_size", n_vocab}});
  std::string d = latte::convert::add_tokenizer_metadata(dir.string(), config, n_vocab, {}, md);
  if (description) *description = d;
  return md;
}

void expect_test_vectors(const ggl::Metadata& md, const std::string& name) {
  const fs::path dir = shared_dir() / "vocab";
  auto tok = latte::Tokenizer::from_metadata(md);
  const auto texts = read_vocab_texts(dir / (name + ".gguf.inp"));
  const auto ids = read_vocab_ids(dir / (name + ".gguf.out"));
  ASSERT_EQ(texts.size(), ids.size());
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(tok->encode(texts[i], false, false), ids[i]) << texts[i];
}

TEST(ConvertTokenizer, DeepSeekLlmByteLevelBpe) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-deepseek-llm.gguf");
  VocabFile v = load_vocab("ggml-vocab-deepseek-llm");
  // Hugging Face's layout: the BPE vocab holds the ordinary tokens; specials and the few extra
  // characters are added tokens; ids never used by the tokenizer ("[PAD...]") do not appear.
  json vocab = json::object(), added = json::array();
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    if (v.tokens[id].rfind("[PAD", 0) == 0) continue;
    if (v.types[id] == 1)
      vocab[v.tokens[id]] = id;
    else
      added.push_back(added_token(static_cast<int64_t>(id), v.tokens[id], v.types[id] == 3));
  }
  json pre = {{"type", "Sequence"}, {"pretokenizers", json::array()}};
  for (const std::string& r : kDeepSeekLlmSplits) pre["pretokenizers"].push_back(split(r));
  pre["pretokenizers"].push_back(byte_level(false));
  json tj = {{"version", "1.0"},
             {"added_tokens", added},
             {"normalizer", {{"type", "Sequence"}, {"normalizers", json::array()}}},
             {"pre_tokenizer", pre},
             {"decoder", {{"type", "ByteLevel"}}},
             {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", v.merges}, {"byte_fallback", false}}}};
  json tc = {{"add_bos_token", true},
             {"add_eos_token", false},
             {"bos_token", {{"__type", "AddedToken"}, {"content", v.tokens[100000]}}},
             {"eos_token", {{"__type", "AddedToken"}, {"content", v.tokens[100001]}}},
             {"pad_token", {{"__type", "AddedToken"}, {"content", v.tokens[100001]}}},
             {"chat_template", "{% for m in messages %}{{ m['content'] }}{% endfor %}"}};
  const fs::path dir = fresh_dir("tok-deepseek");
  std::ofstream(dir / "tokenizer.json") << tj.dump();
  std::ofstream(dir / "tokenizer_config.json") << tc.dump();

  std::string description;
  ggl::Metadata md = convert_dir(dir, static_cast<int64_t>(v.tokens.size()), &description);
  EXPECT_EQ(md.get<std::string>("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(md.get<std::string>("tokenizer.ggml.pre"), "deepseek-llm");
  EXPECT_NE(description.find("deepseek-llm"), std::string::npos) << description;
  EXPECT_EQ(md.get<std::vector<std::string>>("tokenizer.ggml.tokens"), v.tokens);
  EXPECT_EQ(md.get<std::vector<std::string>>("tokenizer.ggml.merges"), v.merges);
  auto types = md.get<std::vector<int32_t>>("tokenizer.ggml.token_type");
  ASSERT_EQ(types.size(), v.types.size());
  for (size_t id = 0; id < types.size(); ++id) {
    // Padding ids are UNUSED (5) as current converters write them; this older file has 4.
    const int32_t want = v.tokens[id].rfind("[PAD", 0) == 0 ? 5 : v.types[id];
    ASSERT_EQ(types[id], want) << "token " << id << " " << v.tokens[id];
  }
  for (const char* key :
       {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id",
        "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token"})
    EXPECT_TRUE(same_value(md.at(key), v.file->metadata().at(key))) << key;
  EXPECT_EQ(md.get<std::string>("tokenizer.chat_template"), tc["chat_template"].get<std::string>());
  expect_test_vectors(md, "ggml-vocab-deepseek-llm");
}

TEST(ConvertTokenizer, Gpt2ByteLevelBpeWithArrayMerges) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-gpt-2.gguf");
  VocabFile v = load_vocab("ggml-vocab-gpt-2");
  json vocab = json::object();
  for (size_t id = 0; id < v.tokens.size(); ++id) vocab[v.tokens[id]] = id;
  // Newer tokenizer.json files write each merge as a [left, right] pair.
  json merges = json::array();
  for (const std::string& m : v.merges) merges.push_back({m.substr(0, m.find(' ')), m.substr(m.find(' ') + 1)});
  json tj = {{"added_tokens", {added_token(50256, "<|endoftext|>", true)}},
             {"pre_tokenizer", byte_level(true)},
             {"decoder", {{"type", "ByteLevel"}}},
             {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  const fs::path dir = fresh_dir("tok-gpt2");
  std::ofstream(dir / "tokenizer.json") << tj.dump();
  std::ofstream(dir / "tokenizer_config.json")
      << json{{"bos_token", "<|endoftext|>"}, {"eos_token", "<|endoftext|>"}}.dump();
  ggl::Metadata md = convert_dir(dir, static_cast<int64_t>(v.tokens.size()));
  EXPECT_EQ(md.get<std::string>("tokenizer.ggml.pre"), "gpt-2");
  EXPECT_EQ(md.get<std::vector<std::string>>("tokenizer.ggml.tokens"), v.tokens);
  EXPECT_EQ(md.get<std::vector<int32_t>>("tokenizer.ggml.token_type"), v.types);
  EXPECT_EQ(md.get<std::vector<std::string>>("tokenizer.ggml.merges"), v.merges);
  EXPECT_EQ(md.get<uint32_t>("tokenizer.ggml.bos_token_id"), 50256u);
  EXPECT_EQ(md.get<uint32_t>("tokenizer.ggml.eos_token_id"), 50256u);
  EXPECT_FALSE(md.has("tokenizer.ggml.add_bos_token"));
  expect_test_vectors(md, "ggml-vocab-gpt-2");
}

// Hugging Face's export of a SentencePiece BPE model: every piece in the vocab, and a merge for
// every way of splitting a piece into two pieces, ordered by the score of the piece they form.
TEST(ConvertTokenizer, LlamaSentencePieceBpeWithByteFallback) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-llama-spm.gguf");
  VocabFile v = load_vocab("ggml-vocab-llama-spm");
  std::map<std::string, int64_t> ids;
  json vocab = json::object();
  for (size_t id = 0; id < v.tokens.size(); ++id)
    vocab[v.tokens[id]] = id, ids[v.tokens[id]] = static_cast<int64_t>(id);
  struct Merge {
    float score;
    int64_t id, left;
    std::string text;
  };
  std::vector<Merge> merges;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    if (v.types[id] != 1) continue;
    const std::string& t = v.tokens[id];
    for (size_t cut = 1; cut < t.size(); ++cut) {
      if ((static_cast<unsigned char>(t[cut]) & 0xC0) == 0x80) continue;  // inside a UTF-8 character
      auto l = ids.find(t.substr(0, cut)), r = ids.find(t.substr(cut));
      if (l != ids.end() && r != ids.end())
        merges.push_back({v.scores[id], static_cast<int64_t>(id), l->second, l->first + " " + r->first});
    }
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    return a.score != b.score ? a.score > b.score : a.id != b.id ? a.id < b.id : a.left < b.left;
  });
  json merge_list = json::array();
  for (const Merge& m : merges) merge_list.push_back(m.text);
  json tj = {
      {"added_tokens", {added_token(0, "<unk>", true), added_token(1, "<s>", true), added_token(2, "</s>", true)}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "▁"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}}},
      {"pre_tokenizer", nullptr},
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}, {"unk_token", "<unk>"}, {"byte_fallback", true}}}};
  const fs::path dir = fresh_dir("tok-llama");
  std::ofstream(dir / "tokenizer.json") << tj.dump();
  std::ofstream(dir / "tokenizer_config.json")
      << json{{"add_bos_token", true}, {"add_eos_token", false}, {"bos_token", "<s>"}, {"eos_token", "</s>"}}.dump();
  ggl::Metadata md = convert_dir(dir, static_cast<int64_t>(v.tokens.size()));
  EXPECT_EQ(md.get<std::string>("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(md.get<std::vector<std::string>>("tokenizer.ggml.tokens"), v.tokens);
  EXPECT_EQ(md.get<std::vector<int32_t>>("tokenizer.ggml.token_type"), v.types);
  for (const char* key :
       {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
        "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token"})
    EXPECT_TRUE(same_value(md.at(key), v.file->metadata().at(key))) << key;
  EXPECT_FALSE(md.has("tokenizer.ggml.add_space_prefix"));
  // Scores are rebuilt from the merge order: the same ranking of the pieces that merges form.
  auto scores = md.get<std::vector<float>>("tokenizer.ggml.scores");
  for (size_t i = 1; i < merges.size(); ++i) {
    if (merges[i - 1].id != merges[i].id && merges[i - 1].score > merges[i].score) {
      ASSERT_GT(scores[merges[i - 1].id], scores[merges[i].id]) << v.tokens[merges[i].id];
    }
  }
  expect_test_vectors(md, "ggml-vocab-llama-spm");
}

json pre_of(std::vector<json> steps) { return {{"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", steps}}}}; }

TEST(ConvertTokenizer, IdentifiesPreTokenizers) {
  using latte::convert::identify_pre_tokenizer;
  EXPECT_EQ(identify_pre_tokenizer(json{{"pre_tokenizer", byte_level(true)}}, "t"), "gpt-2");
  EXPECT_EQ(
      identify_pre_tokenizer(pre_of({split("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                           "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
                                     byte_level(false)}),
                             "t"),
      "llama-bpe");
  EXPECT_EQ(identify_pre_tokenizer(
                pre_of({split("\\p{N}{1,3}"), split("[一-龥぀-ゟ゠-ヿ]+"),
                        split("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"
                              "\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"),
                        byte_level(false)}),
                "t"),
            "deepseek-v3");
  std::vector<json> ds;
  for (const std::string& r : kDeepSeekLlmSplits) ds.push_back(split(r));
  ds.push_back(byte_level(false));
  EXPECT_EQ(identify_pre_tokenizer(pre_of(ds), "t"), "deepseek-llm");
  // CR/LF written as regex escapes instead of raw characters are the same pattern.
  ds[0] = split("[\\r\\n]");
  EXPECT_EQ(identify_pre_tokenizer(pre_of(ds), "t"), "deepseek-llm");
  try {
    identify_pre_tokenizer(pre_of({split("\\p{L}+"), byte_level(false)}), "tokenizer.json");
    ADD_FAILURE();
  } catch (const ggl::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("unrecognised byte-level pre-tokenizer (Split regexes: '\\p{L}+')"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--tokenizer-pre"), std::string::npos) << msg;
  }
}

// A small byte-level tokenizer for the edge cases below.
fs::path tiny_bpe_dir(const std::string& name, const json& tj, const json& tc) {
  const fs::path dir = fresh_dir(name);
  std::ofstream(dir / "tokenizer.json") << tj.dump();
  if (!tc.is_null()) std::ofstream(dir / "tokenizer_config.json") << tc.dump();
  return dir;
}

json tiny_bpe() {
  return {
      {"added_tokens", {added_token(5, "<|bos|>", true), added_token(6, "<|user|>", false)}},
      {"pre_tokenizer", byte_level(true)},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<|bos|>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}}}},
      {"model",
       {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}, {"Ġ", 3}, {"Ġa", 4}}}, {"merges", {"a b", "Ġ a"}}}}};
}

TEST(ConvertTokenizer, PaddingAddedTokensTemplatesAndBosFromPostProcessor) {
  const fs::path dir = tiny_bpe_dir(
      "tok-tiny", tiny_bpe(),
      json{{"bos_token", "<|bos|>"},
           {"chat_template", {{{"name", "default"}, {"template", "D"}}, {{"name", "tool_use"}, {"template", "T"}}}}});
  ggl::Metadata md = convert_dir(dir, 10);
  EXPECT_EQ(md.get<std::vector<std::string>>("tokenizer.ggml.tokens"),
            (std::vector<std::string>{"a", "b", "ab", "Ġ", "Ġa", "<|bos|>", "<|user|>", "[PAD7]", "[PAD8]", "[PAD9]"}));
  EXPECT_EQ(md.get<std::vector<int32_t>>("tokenizer.ggml.token_type"),
            (std::vector<int32_t>{1, 1, 1, 1, 1, 3, 4, 5, 5, 5}));
  EXPECT_EQ(md.get<uint32_t>("tokenizer.ggml.bos_token_id"), 5u);
  EXPECT_TRUE(md.get<bool>("tokenizer.ggml.add_bos_token"));  // from the post-processor template
  EXPECT_FALSE(md.get<bool>("tokenizer.ggml.add_eos_token"));
  EXPECT_EQ(md.get<std::string>("tokenizer.chat_template"), "D");
  EXPECT_EQ(md.get<std::string>("tokenizer.chat_template.tool_use"), "T");

  // A chat_template.jinja file next to the tokenizer, and no tokenizer_config.json: ids from config.json.
  const fs::path dir2 = tiny_bpe_dir("tok-jinja", tiny_bpe(), nullptr);
  std::ofstream(dir2 / "chat_template.jinja") << "{{ messages }}";
  ggl::Metadata md2("converted");
  latte::convert::add_tokenizer_metadata(
      dir2.string(), JsonObject("config.json", json{{"bos_token_id", 5}, {"eos_token_id", 6}}), 7, {}, md2);
  EXPECT_EQ(md2.get<std::string>("tokenizer.chat_template"), "{{ messages }}");
  EXPECT_EQ(md2.get<uint32_t>("tokenizer.ggml.eos_token_id"), 6u);
}

void expect_tokenizer_error(const fs::path& dir, int64_t n_vocab, const std::string& expected) {
  try {
    convert_dir(dir, n_vocab);
    ADD_FAILURE() << "no error, expected " << expected;
  } catch (const ggl::Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

TEST(ConvertTokenizer, Errors) {
  expect_tokenizer_error(tiny_bpe_dir("tok-e1", tiny_bpe(), nullptr), 6,
                         "token id 6 does not fit the model's 6 embedding rows");
  json tj = tiny_bpe();
  tj["model"]["type"] = "Unigram";
  expect_tokenizer_error(tiny_bpe_dir("tok-e2", tj, nullptr), 10, "tokenizer model 'Unigram' is not supported");
  expect_tokenizer_error(tiny_bpe_dir("tok-e3", tiny_bpe(), json{{"eos_token", "<|nope|>"}}), 10,
                         "eos_token '<|nope|>' is not in the vocabulary");
  tj = tiny_bpe();
  tj["model"]["merges"].push_back("x y");
  tj["model"]["byte_fallback"] = true;
  expect_tokenizer_error(tiny_bpe_dir("tok-e4", tj, nullptr), 10,
                         "merge 'x y' produces a token that is not in the vocab");
  tj = tiny_bpe();
  tj.erase("pre_tokenizer");
  expect_tokenizer_error(tiny_bpe_dir("tok-e5", tj, nullptr), 10, "without a ByteLevel pre-tokenizer or byte fallback");
  const fs::path broken = fresh_dir("tok-e6");
  std::ofstream(broken / "tokenizer.json") << "{\"model\": ";
  expect_tokenizer_error(broken, 10, "tokenizer.json: not valid JSON");
  // No tokenizer.json at all: nothing is added (the converter then writes model "none").
  EXPECT_EQ(convert_dir(fresh_dir("tok-none"), 10).entries().size(), 0u);
}

}  // namespace test_convert_tokenizer
