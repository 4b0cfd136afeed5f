// Cutting text at special tokens before the tokenizer proper sees it.
//
// User-defined tokens are always matched literally; control and unknown tokens ("<s>",
// "<|endoftext|>", "<unk>") only when the caller asks to parse special tokens. Longer token texts
// take precedence over shorter ones wherever they overlap (the rule of llama.cpp and of Hugging
// Face's added-token matching), ties going to the lower id.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "src/tokenizer/vocab.h"

namespace latte {

// A piece of the input: plain text (token == -1), or one special token and the text it matched.
struct TextFragment {
  std::string_view text;
  int32_t token = -1;
};

class SpecialTokenMatcher {
 public:
  SpecialTokenMatcher() = default;
  explicit SpecialTokenMatcher(const Vocab& vocab);

  // The fragments of `text`, in order; their texts concatenate to `text`.
  std::vector<TextFragment> partition(std::string_view text, bool parse_special) const;

 private:
  struct Candidate {
    int32_t id;
    bool needs_parse_special;  // control / unknown token
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, Candidate, Hash, std::equal_to<>> by_text_;
  std::vector<size_t> lengths_;            // distinct candidate lengths, longest first
  std::array<bool, 256> first_byte_ = {};  // quick rejection of positions no candidate starts at
};

}  // namespace latte
