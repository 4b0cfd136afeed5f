// SentencePiece-style BPE (`tokenizer.ggml.model` = "llama"): Llama 1/2, TinyStories, Mistral v1.
//
// Spaces become '▁' (U+2581) and, when the vocabulary asks for it, one '▁' is put in front of the
// text. The text is split into characters and the adjacent pair whose concatenation is the token
// with the highest score is merged (leftmost on ties), until no pair forms a token. Characters
// left without a token are written as byte tokens <0xXX> (byte fallback), else as <unk>.
#pragma once
#include "src/tokenizer/tokenizer.h"

namespace latte {

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(Vocab vocab);
  std::string describe() const override;

 private:
  void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const override;
  // The token a merge may produce from this text (normal and user-defined tokens only), or -1.
  int32_t mergeable_token(std::string_view text) const;

  int32_t byte_tokens_[256];  // <0xXX> (or the byte as a one-character token), -1 if absent
};

}  // namespace latte
