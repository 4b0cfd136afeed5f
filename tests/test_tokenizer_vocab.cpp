// Tokenizer test vectors from ../shared/vocab: every text of NAME.gguf.inp must encode (no BOS,
// special tokens not parsed) to exactly the ids on the matching line of NAME.gguf.out.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ggml-like/gguf.h"
#include "src/tokenizer/stream_decoder.h"
#include "src/tokenizer/tokenizer.h"
#include "test_support.h"

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The texts are joined with "\n__ggml_vocab_test__\n", and the file ends with that separator.
std::vector<std::string> read_texts(const std::filesystem::path& path) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::string all = read_file(path);
  std::vector<std::string> texts;
  size_t pos = 0;
  for (size_t hit; (hit = all.find(sep, pos)) != std::string::npos; pos = hit + sep.size())
    texts.push_back(all.substr(pos, hit - pos));
  if (pos < all.size()) texts.push_back(all.substr(pos));
  return texts;
}

std::vector<std::vector<int32_t>> read_ids(const std::filesystem::path& path) {
  std::istringstream in(read_file(path));
  std::vector<std::vector<int32_t>> lines;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::vector<int32_t> ids;
    for (int32_t id; words >> id;) ids.push_back(id);
    lines.push_back(std::move(ids));
  }
  return lines;
}

std::string join(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

std::string escaped(const std::string& text) {
  std::string s;
  for (unsigned char c : text) {
    if (c == '\n') s += "\\n";
    else if (c == '\t') s += "\\t";
    else if (c == '\r') s += "\\r";
    else s += static_cast<char>(c);
  }
  return s;
}

void check_vectors(const std::string& name) {
  const auto dir = latte::testing::shared_dir() / "vocab";
  ggl::GgufFile file((dir / name).string());
  auto tokenizer = latte::Tokenizer::from_gguf(file);
  auto texts = read_texts(dir / (name + ".inp"));
  auto expected = read_ids(dir / (name + ".out"));
  ASSERT_EQ(texts.size(), expected.size()) << name << ": .inp and .out disagree on the number of vectors";

  int passed = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    auto ids = tokenizer->encode(texts[i], /*add_bos=*/false, /*parse_special=*/false);
    if (ids == expected[i]) ++passed;
    else
      ADD_FAILURE() << name << " vector " << i << " text \"" << escaped(texts[i]) << "\"\n  expected: "
                    << join(expected[i]) << "\n  got:      " << join(ids);
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

}  // namespace
