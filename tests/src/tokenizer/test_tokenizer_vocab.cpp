// Tokenizer test vectors from ../shared/vocab: every text of NAME.gguf.inp must encode (no BOS,
// special tokens not parsed) to exactly the ids on the matching line of NAME.gguf.out.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ggml-like/gguf/gguf.h"
#include "src/tokenizer/stream_decoder.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/test_support.h"
#include "tests/support/tokenizer_util.h"

namespace test_tokenizer_vocab {

using latte::testing::read_vocab_ids;
using latte::testing::read_vocab_texts;

std::string join(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    if (!s.empty()) s += ' ';
    s += std::to_string(id);
  }
  return s;
}

std::string escaped(const std::string& text) {
  std::string s;
  for (unsigned char c : text) {
    if (c == '\n')
      s += "\\n";
    else if (c == '\t')
      s += "\\t";
    else if (c == '\r')
      s += "\\r";
    else
      s += static_cast<char>(c);
  }
  return s;
}

void check_vectors(const std::string& name) {
  const auto dir = latte::testing::shared_dir() / "vocab";
  ggl::GgufFile file((dir / name).string());
  auto tokenizer = latte::Tokenizer::from_gguf(file);
  auto texts = read_vocab_texts(dir / (name + ".inp"));
  auto expected = read_vocab_ids(dir / (name + ".out"));
  ASSERT_EQ(texts.size(), expected.size()) << name << ": .inp and .out disagree on the number of vectors";

  int passed = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    auto ids = tokenizer->encode(texts[i], /*add_bos=*/false, /*parse_special=*/false);
    if (ids == expected[i])
      ++passed;
    else
      ADD_FAILURE() << name << " vector " << i << " text \"" << escaped(texts[i])
                    << "\"\n  expected: " << join(expected[i]) << "\n  got:      " << join(ids);
  }
  std::printf("%s: %d/%zu vectors match (%s)\n", name.c_str(), passed, texts.size(), tokenizer->describe().c_str());
}

TEST(TokenizerVectors, DeepSeekLlm) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-deepseek-llm.gguf");
  check_vectors("ggml-vocab-deepseek-llm.gguf");
}

TEST(TokenizerVectors, Gpt2) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-gpt-2.gguf");
  check_vectors("ggml-vocab-gpt-2.gguf");
}

TEST(TokenizerVectors, LlamaSpm) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-llama-spm.gguf");
  check_vectors("ggml-vocab-llama-spm.gguf");
}

}  // namespace test_tokenizer_vocab
