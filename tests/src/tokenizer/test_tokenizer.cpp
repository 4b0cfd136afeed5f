// Tokenizer behaviour beyond the shared vectors: the story models' SentencePiece vocabulary,
// round trips, special and control tokens, tokenizer-less models, pre-tokenizer splits, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <random>

#include "ggml-like/gguf/gguf.h"
#include "src/tokenizer/pre_tokenizer.h"
#include "src/tokenizer/stream_decoder.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/test_support.h"
#include "tests/support/tokenizer_util.h"

namespace test_tokenizer {

using latte::Tokenizer;
using latte::TokenType;
namespace lt = latte::testing;

// Each shared GGUF is opened once per process.
const ggl::GgufFile& shared_gguf(const std::string& relpath) {
  static std::map<std::string, std::unique_ptr<ggl::GgufFile>> files;
  auto& f = files[relpath];
  if (!f) f = std::make_unique<ggl::GgufFile>((lt::shared_dir() / relpath).string());
  return *f;
}

const Tokenizer& shared_tokenizer(const std::string& relpath) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> tokenizers;
  auto& t = tokenizers[relpath];
  if (!t) t = Tokenizer::from_gguf(shared_gguf(relpath));
  return *t;
}

std::vector<int32_t> read_ids(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<int32_t> ids;
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

// --- The story models (llama SentencePiece vocabulary of 512 tokens) ---

void check_story_model(const std::string& model, const std::string& tokens) {
  const Tokenizer& tok = shared_tokenizer(model);
  EXPECT_EQ(tok.kind(), latte::TokenizerKind::kSentencePiece);
  EXPECT_EQ(tok.n_vocab(), 512);
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_TRUE(tok.is_eog(2));
  EXPECT_TRUE(tok.add_bos_default());

  // The reference ids are BOS + a story that starts with the prompt "Once upon a time".
  std::vector<int32_t> story = read_ids(lt::shared_dir() / tokens);
  ASSERT_GT(story.size(), 10u);
  std::string text = latte::detokenize(tok, story);
  ASSERT_EQ(text.rfind("Once upon a time", 0), 0u) << "the story text changed: " << text;

  std::vector<int32_t> prompt = tok.encode("Once upon a time", /*add_bos=*/true, /*parse_special=*/false);
  ASSERT_LE(prompt.size(), story.size());
  EXPECT_EQ(prompt, std::vector<int32_t>(story.begin(), story.begin() + prompt.size()));
  // The whole story re-encodes to the reference ids, and decodes back to the same text.
  EXPECT_EQ(tok.encode(text, true, false), story);
  EXPECT_EQ(latte::detokenize(tok, tok.encode(text, true, false)), text);
}

TEST(Tokenizer, Stories260kPromptMatchesReferenceIds) {
  LATTE_REQUIRE_SHARED("models/stories260K.gguf");
  check_story_model("models/stories260K.gguf", "models/stories260K.tokens.txt");
}

TEST(Tokenizer, TinyMlaStoriesPromptMatchesReferenceIds) {
  LATTE_REQUIRE_SHARED("models/tiny-mla-stories-f32.gguf");
  check_story_model("models/tiny-mla-stories-f32.gguf", "models/tiny-mla-stories.tokens.txt");
}

// --- Round trips ---

void check_round_trips(const std::string& vocab, int count) {
  const Tokenizer& tok = shared_tokenizer(vocab);
  std::mt19937 rng(1234);
  int checked = 0;
  for (int i = 0; i < count; ++i) {
    std::string text = lt::random_utf8(rng, 40);
    std::vector<int32_t> ids = tok.encode(text, false, false);
    for (int32_t id : ids) {
      TokenType t = tok.token_type(id);
      ASSERT_TRUE(t != TokenType::kControl && t != TokenType::kUnknown)
          << vocab << ": plain text produced control/unknown token " << id;
    }
    ASSERT_EQ(latte::detokenize(tok, ids), text) << vocab << ": round trip failed for random text #" << i;
    ++checked;
  }
  EXPECT_EQ(checked, count);
}

TEST(Tokenizer, ByteLevelBpeRoundTripsRandomUtf8Gpt2) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-gpt-2.gguf");
  check_round_trips("vocab/ggml-vocab-gpt-2.gguf", 300);
}

TEST(Tokenizer, ByteLevelBpeRoundTripsRandomUtf8DeepSeek) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-deepseek-llm.gguf");
  check_round_trips("vocab/ggml-vocab-deepseek-llm.gguf", 300);
}

TEST(Tokenizer, SentencePieceWithByteFallbackRoundTripsRandomUtf8) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-llama-spm.gguf");
  check_round_trips("vocab/ggml-vocab-llama-spm.gguf", 300);
}

TEST(Tokenizer, ByteLevelBpeRoundTripsInvalidUtf8Bytes) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-gpt-2.gguf");
  const Tokenizer& tok = shared_tokenizer("vocab/ggml-vocab-gpt-2.gguf");
  // Not required by the decoder contract (it replaces invalid bytes), but encoding must not
  // lose them: the raw pieces concatenate back to the input.
  std::string text = "ok \xFF\xFE bad \xE2\x82 end\xC3";
  std::string raw;
  for (int32_t id : tok.encode(text, false, false)) raw += tok.token_to_piece(id);
  EXPECT_EQ(raw, text);
}

// --- Special, control and user-defined tokens ---

TEST(Tokenizer, ControlTokenTextIsParsedOnlyWhenAsked) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-gpt-2.gguf");
  const Tokenizer& tok = shared_tokenizer("vocab/ggml-vocab-gpt-2.gguf");
  const int32_t eot = 50256;
  ASSERT_EQ(tok.token_text(eot), "<|endoftext|>");
  EXPECT_EQ(tok.token_type(eot), TokenType::kControl);
  EXPECT_TRUE(tok.is_eog(eot));

  std::vector<int32_t> parsed = tok.encode("Hi<|endoftext|>there", false, true);
  std::vector<int32_t> expected = tok.encode("Hi", false, false);
  expected.push_back(eot);
  for (int32_t id : tok.encode("there", false, false)) expected.push_back(id);
  EXPECT_EQ(parsed, expected);

  std::vector<int32_t> plain = tok.encode("Hi<|endoftext|>there", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), eot), 0);
  EXPECT_EQ(latte::detokenize(tok, plain), "Hi<|endoftext|>there");
}

TEST(Tokenizer, SentencePieceSpecialTokensAndSpacePrefix) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-llama-spm.gguf");
  const Tokenizer& tok = shared_tokenizer("vocab/ggml-vocab-llama-spm.gguf");
  // After a special token the text gets the space prefix again, as at the start.
  std::vector<int32_t> expected = {1};
  for (int32_t id : tok.encode("Hello", false, false)) expected.push_back(id);
  EXPECT_EQ(tok.encode("<s>Hello", false, true), expected);
  // Without parse_special "<s>" is text, and never the control token.
  for (int32_t id : tok.encode("<s>Hello</s>", false, false)) EXPECT_NE(tok.token_type(id), TokenType::kControl);
  // The spaces of the text are kept ('▁' per space), the prefix space is one more.
  EXPECT_EQ(latte::detokenize(tok, tok.encode("  two spaces", true, false)), "  two spaces");
}

TEST(Tokenizer, DeepSeekBosAndUserDefinedTokens) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-deepseek-llm.gguf");
  const Tokenizer& tok = shared_tokenizer("vocab/ggml-vocab-deepseek-llm.gguf");
  EXPECT_EQ(tok.bos(), 100000);
  EXPECT_EQ(tok.eos(), 100001);
  EXPECT_TRUE(tok.is_eog(100001));
  EXPECT_TRUE(tok.add_bos_default());
  EXPECT_EQ(tok.encode("<｜begin▁of▁sentence｜>Hi", false, true)[0], 100000);
  EXPECT_EQ(tok.encode("Hi", true, false)[0], 100000);
  // 'ü' is a user-defined token: matched in the text even without parse_special.
  std::vector<int32_t> ids = tok.encode("ü", false, false);
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(tok.token_type(ids[0]), TokenType::kUserDefined);
  EXPECT_EQ(tok.token_to_piece(ids[0]), "ü");
}

TEST(Tokenizer, TokenToPieceGivesRawBytes) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-gpt-2.gguf");
  const Tokenizer& tok = shared_tokenizer("vocab/ggml-vocab-gpt-2.gguf");
  std::vector<int32_t> ids = tok.encode(" the\n", false, false);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(tok.token_text(ids[0]), "\xC4\xA0the");  // "Ġthe" in the byte-level alphabet
  EXPECT_EQ(tok.token_to_piece(ids[0]), " the");
  EXPECT_EQ(tok.token_to_piece(ids[1]), "\n");
  EXPECT_EQ(tok.token_to_piece(50256, /*render_special=*/true), "<|endoftext|>");
  EXPECT_EQ(tok.token_to_piece(50256, /*render_special=*/false), "");
  EXPECT_THROW(tok.token_to_piece(-1), ggl::Error);
  EXPECT_THROW(tok.token_to_piece(tok.n_vocab()), ggl::Error);
  EXPECT_TRUE(tok.encode("", false, false).empty());
  EXPECT_EQ(tok.encode("x", /*add_bos=*/true, false).front(), 50256);
}

// --- Hand-made vocabularies: exclusion of control tokens from merges, errors ---

ggl::Metadata spm_metadata(const std::vector<std::string>& tokens, const std::vector<int32_t>& types) {
  ggl::Metadata md("handmade.gguf");
  md.set("tokenizer.ggml.model", lt::string_value("llama"));
  md.set("tokenizer.ggml.tokens", lt::string_array(tokens));
  std::vector<float> scores;
  for (size_t i = 0; i < tokens.size(); ++i) scores.push_back(-static_cast<float>(i));
  md.set("tokenizer.ggml.scores", lt::float_array(scores));
  md.set("tokenizer.ggml.token_type", lt::int_array(types));
  return md;
}

TEST(Tokenizer, SentencePieceMergesNeverProduceControlTokens) {
  // "<s>" is a control token, but "<s" + ">" would merge into it.
  auto md = spm_metadata({"<unk>", "<s>", "</s>", "\xE2\x96\x81", "<", "s", ">", "<s"}, {2, 3, 3, 1, 1, 1, 1, 1});
  auto tok = Tokenizer::from_metadata(md);
  std::vector<int32_t> ids = tok->encode("<s>", false, false);
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 7, 6}));  // ▁ <s >
  EXPECT_EQ(tok->encode("<s>", false, true), (std::vector<int32_t>{1}));
  // No byte tokens: a character outside the vocabulary becomes <unk>.
  EXPECT_EQ(tok->encode("s\xC3\xA9", false, false), (std::vector<int32_t>{3, 5, 0}));
}

TEST(Tokenizer, TokenizerLessModelGivesClearError) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-mini-mla-f32.gguf");
  const ggl::GgufFile& f = shared_gguf("fixtures/ds2-mini-mla-f32.gguf");
  EXPECT_FALSE(Tokenizer::has_tokenizer(f.metadata()));
  try {
    Tokenizer::from_gguf(f);
    FAIL() << "expected an error";
  } catch (const ggl::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("ds2-mini-mla-f32.gguf"), std::string::npos) << msg;
    EXPECT_NE(msg.find("no tokenizer"), std::string::npos) << msg;
  }
}

TEST(Tokenizer, BadMetadataGivesOneLineErrors) {
  auto md = spm_metadata({"<unk>", "a"}, {2, 1});
  md.set("tokenizer.ggml.scores", lt::float_array({0.0f}));
  EXPECT_THROW(Tokenizer::from_metadata(md), ggl::Error);

  ggl::Metadata no_tokens("x.gguf");
  no_tokens.set("tokenizer.ggml.model", lt::string_value("gpt2"));
  EXPECT_THROW(Tokenizer::from_metadata(no_tokens), ggl::Error);

  ggl::Metadata unsupported("x.gguf");
  unsupported.set("tokenizer.ggml.model", lt::string_value("bert"));
  EXPECT_THROW(Tokenizer::from_metadata(unsupported), ggl::Error);
}

TEST(Tokenizer, UnknownPreTokenizerWarnsOnceAndFallsBack) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-gpt-2.gguf");
  ggl::Metadata md = shared_gguf("vocab/ggml-vocab-gpt-2.gguf").metadata();
  md.set("tokenizer.ggml.pre", lt::string_value("no-such-pre-tokenizer-1234"));
  ::testing::internal::CaptureStderr();
  auto a = Tokenizer::from_metadata(md);
  auto b = Tokenizer::from_metadata(md);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("no-such-pre-tokenizer-1234"), std::string::npos) << err;
  EXPECT_EQ(err.find("no-such-pre-tokenizer-1234"), err.rfind("no-such-pre-tokenizer-1234")) << "warned twice";
  EXPECT_NE(a->describe().find("pre-tokenizer default"), std::string::npos) << a->describe();
  EXPECT_EQ(latte::detokenize(*b, b->encode("Hello world 12345!", false, false)), "Hello world 12345!");
}

// --- Pre-tokenizer splits ---

std::vector<std::string> split(const char* pre, std::string_view text) {
  latte::PreTokenizer p(pre);
  std::vector<std::string> words;
  for (auto w : p.split(text)) words.emplace_back(w);
  return words;
}

using Words = std::vector<std::string>;

TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(split("gpt-2", "Hello world  !!"), (Words{"Hello", " world", " ", " !!"}));
  EXPECT_EQ(split("gpt-2", "I'm 12345"), (Words{"I", "'m", " 12345"}));
  EXPECT_EQ(split("gpt-2", "a\xFF b"), (Words{"a", "\xFF", " b"}));
}

TEST(PreTokenizer, Llama3GroupsDigitsByThree) {
  EXPECT_EQ(split("llama-bpe", "I'M 12345\n\nok"), (Words{"I", "'M", " ", "123", "45", "\n\n", "ok"}));
  EXPECT_TRUE(latte::PreTokenizer("llama3").ignore_merges());
}

TEST(PreTokenizer, DeepSeekLlm) {
  EXPECT_EQ(split("deepseek-llm", "abc 12345\nÀé, 你好"), (Words{"abc", " ", "12345", "\n", "Àé", ",", " ", "你好"}));
  // The punctuation class of the model's tokenizer, [!-/:-~...], also spans the ASCII letters,
  // so a word that mixes them with other cased letters is split again by that later expression.
  EXPECT_EQ(split("deepseek-llm", "Àb"), (Words{"À", "b"}));
}

TEST(PreTokenizer, DeepSeekV3) {
  EXPECT_EQ(split("deepseek-v3", "abc 12345 こんにちは"), (Words{"abc", " ", "123", "45", " ", "こんにちは"}));
}

TEST(PreTokenizer, DeepSeekCoder) {
  // '=' is a math symbol (Sm), not punctuation (P): it stays in the gap with the spaces.
  EXPECT_EQ(split("deepseek-coder", "x = 42;"), (Words{"x", " = ", "4", "2", ";"}));
}

TEST(PreTokenizer, EveryKnownNameCompilesAndCoversTheText) {
  std::mt19937 rng(7);
  for (const std::string& name : latte::PreTokenizer::known_names()) {
    latte::PreTokenizer p(name);
    for (int i = 0; i < 50; ++i) {
      std::string text = lt::random_utf8(rng, 30);
      std::string joined;
      for (auto w : p.split(text)) {
        ASSERT_FALSE(w.empty()) << name;
        joined += w;
      }
      ASSERT_EQ(joined, text) << name;
    }
  }
}

}  // namespace test_tokenizer
