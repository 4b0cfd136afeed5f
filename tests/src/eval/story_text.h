// The text both evaluation tools' tests read (tests/data/eval/story.txt) and its chunks as
// llama-perplexity and llama-imatrix make them: the whole file tokenized with BOS first (its last
// newline dropped), cut into chunks of n_ctx tokens, each chunk's first token replaced by BOS.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "src/tokenizer/tokenizer.h"
#include "tests/support/test_support.h"

namespace test_eval_story {

inline std::string shared(const std::string& rel) { return (latte::testing::shared_dir() / rel).string(); }
inline std::filesystem::path story() { return latte::testing::test_data_dir() / "eval" / "story.txt"; }

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<int32_t> story_tokens(const latte::Tokenizer& tok) {
  std::string text = slurp(story());
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return tok.encode(text, tok.add_bos_default(), false);
}

inline std::vector<std::vector<int32_t>> story_chunks(const latte::Tokenizer& tok, int64_t n_ctx, int64_t n_chunks) {
  const std::vector<int32_t> ids = story_tokens(tok);
  std::vector<std::vector<int32_t>> out;
  for (int64_t c = 0; c < n_chunks; ++c) {
    out.emplace_back(ids.begin() + c * n_ctx, ids.begin() + (c + 1) * n_ctx);
    out.back()[0] = tok.bos();
  }
  return out;
}

}  // namespace test_eval_story
