// Byte-level BPE (`tokenizer.ggml.model` = "gpt2"): GPT-2, Llama 3, DeepSeek V2/V3, Qwen, ...
//
// Each word from the pre-tokenizer is written in the byte-level alphabet (byte_level.h), split
// into characters, and adjacent pairs are merged by the rank of their merge rule (lowest rank,
// then leftmost, first) until no rule applies. The resulting symbols are tokens.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "src/tokenizer/pre_tokenizer.h"
#include "src/tokenizer/tokenizer.h"

namespace latte {

class BpeTokenizer final : public Tokenizer {
 public:
  // `merges` are the `tokenizer.ggml.merges` rules "left right", highest priority first.
  BpeTokenizer(Vocab vocab, const std::vector<std::string>& merges, PreTokenizer pre);
  std::string describe() const override;

 private:
  void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const override;
  // Tokens of one byte-level word.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  // The token for a symbol that BPE may produce (not a control/unknown token), or -1.
  int32_t symbol_token(std::string_view symbol) const;

  PreTokenizer pre_;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ranks_;  // "left right" -> rank
};

}  // namespace latte
