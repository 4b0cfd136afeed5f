// Streaming detokenization: characters split across tokens are held back until complete, byte
// tokens are reassembled, and only valid UTF-8 ever comes out.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>

#include "ggml-like/gguf/gguf.h"
#include "src/tokenizer/stream_decoder.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/test_support.h"
#include "tests/support/tokenizer_util.h"

namespace test_detokenizer {

using latte::StreamDecoder;
using latte::Tokenizer;
namespace lt = latte::testing;

const Tokenizer& shared_tokenizer(const std::string& relpath) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> tokenizers;
  auto& t = tokenizers[relpath];
  if (!t) t = Tokenizer::from_gguf(ggl::GgufFile((lt::shared_dir() / relpath).string()));
  return *t;
}

int32_t byte_token(const Tokenizer& tok, int byte) {
  char name[8];
  std::snprintf(name, sizeof(name), "<0x%02X>", byte);
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    if (tok.token_text(id) == name) return id;
  return -1;
}

TEST(StreamDecoder, HoldsBackSplitCharactersInByteLevelBpe) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-gpt-2.gguf");
  const Tokenizer& tok = shared_tokenizer("vocab/ggml-vocab-gpt-2.gguf");
  const std::string text = "\xF0\x9F\xA6\x99";  // 🦙: no single GPT-2 token, so its bytes are split
  std::vector<int32_t> ids = tok.encode(text, false, false);
  ASSERT_GT(ids.size(), 1u);
  StreamDecoder dec(tok);
  std::string out;
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    EXPECT_EQ(dec.push(ids[i]), "") << "an incomplete character was emitted";
    EXPECT_GT(dec.pending_bytes(), 0u);
  }
  EXPECT_EQ(dec.push(ids.back()), text);
  EXPECT_EQ(dec.pending_bytes(), 0u);
  EXPECT_EQ(dec.flush(), "");
}

TEST(StreamDecoder, ReassemblesSentencePieceByteTokens) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-llama-spm.gguf");
  const Tokenizer& tok = shared_tokenizer("vocab/ggml-vocab-llama-spm.gguf");
  std::vector<int32_t> ids = tok.encode("\xF0\x9F\xA6\x99", false, false);  // ▁ + 4 byte tokens
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_EQ(tok.token_type(ids[1]), latte::TokenType::kByte);
  StreamDecoder dec(tok, {.render_special = false, .strip_leading_space = false});
  EXPECT_EQ(dec.push(ids[0]), " ");
  EXPECT_EQ(dec.push(ids[1]), "");
  EXPECT_EQ(dec.push(ids[2]), "");
  EXPECT_EQ(dec.push(ids[3]), "");
  EXPECT_EQ(dec.push(ids[4]), "\xF0\x9F\xA6\x99");
}

TEST(StreamDecoder, InvalidBytesBecomeReplacementCharacters) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-llama-spm.gguf");
  const Tokenizer& tok = shared_tokenizer("vocab/ggml-vocab-llama-spm.gguf");
  const std::string fffd = "\xEF\xBF\xBD";
  int32_t xFF = byte_token(tok, 0xFF), xE2 = byte_token(tok, 0xE2), x82 = byte_token(tok, 0x82),
          x41 = byte_token(tok, 0x41), xC3 = byte_token(tok, 0xC3);
  ASSERT_TRUE(xFF >= 0 && xE2 >= 0 && x82 >= 0 && x41 >= 0 && xC3 >= 0);

  StreamDecoder dec(tok);
  EXPECT_EQ(dec.push(xFF), fffd);  // can never start a character
  EXPECT_EQ(dec.push(xE2), "");    // might still become '€' (E2 82 AC)
  EXPECT_EQ(dec.push(x82), "");
  EXPECT_EQ(dec.push(x41), fffd + "A");  // it did not: one U+FFFD for the broken E2 82, then 'A'
  EXPECT_EQ(dec.push(xC3), "");
  EXPECT_EQ(dec.flush(), fffd);  // the stream ended inside a character
  EXPECT_EQ(dec.pending_bytes(), 0u);
}

TEST(StreamDecoder, StripsTheSpacePrefixAfterBosOnly) {
  LATTE_REQUIRE_SHARED("models/stories260K.gguf");
  const Tokenizer& tok = shared_tokenizer("models/stories260K.gguf");
  std::vector<int32_t> ids = tok.encode("Once upon a time", true, false);
  EXPECT_EQ(latte::detokenize(tok, ids), "Once upon a time");
  EXPECT_EQ(latte::detokenize(tok, ids, {.render_special = false, .strip_leading_space = false}), " Once upon a time");
  EXPECT_EQ(latte::detokenize(tok, ids, {.render_special = true, .strip_leading_space = true}), "<s>Once upon a time");
  // Only the first text piece loses its space.
  StreamDecoder dec(tok);
  std::string out;
  for (int32_t id : ids) out += dec.push(id);
  for (int32_t id : tok.encode(" there", false, false)) out += dec.push(id);
  EXPECT_EQ(out, "Once upon a time  there");  // " there" encodes as "▁▁there"
}

TEST(StreamDecoder, ByteLevelBpeKeepsLeadingSpaces) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-deepseek-llm.gguf");
  const Tokenizer& tok = shared_tokenizer("vocab/ggml-vocab-deepseek-llm.gguf");
  EXPECT_FALSE(tok.add_space_prefix());
  EXPECT_EQ(latte::detokenize(tok, tok.encode(" Hello", true, false)), " Hello");
  EXPECT_EQ(latte::detokenize(tok, tok.encode("Hi", true, false), {.render_special = true}),
            "<｜begin▁of▁sentence｜>Hi");
}

TEST(StreamDecoder, EveryChunkIsValidUtf8AndTheChunksMakeTheText) {
  for (const char* vocab :
       {"vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-deepseek-llm.gguf", "vocab/ggml-vocab-llama-spm.gguf"}) {
    LATTE_REQUIRE_SHARED(vocab);
    const Tokenizer& tok = shared_tokenizer(vocab);
    std::mt19937 rng(99);
    for (int i = 0; i < 200; ++i) {
      std::string text = lt::random_utf8(rng, 30);
      StreamDecoder dec(tok);
      std::string out;
      for (int32_t id : tok.encode(text, false, false)) {
        std::string chunk = dec.push(id);
        ASSERT_TRUE(lt::is_valid_utf8(chunk)) << vocab;
        out += chunk;
      }
      out += dec.flush();
      ASSERT_EQ(out, text) << vocab << " text #" << i;
    }
  }
}

}  // namespace test_detokenizer
