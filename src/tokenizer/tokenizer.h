// Text <-> token ids for a model, built from its GGUF metadata (`tokenizer.ggml.*`).
//
//   auto tok = latte::Tokenizer::from_gguf(file);
//   std::vector<int32_t> ids = tok->encode("Once upon a time", tok->add_bos_default(), false);
//   std::string bytes = tok->token_to_piece(ids[1]);
//
// Two families: byte-level BPE ("gpt2", see bpe_tokenizer.h) and SentencePiece-style ("llama",
// see spm_tokenizer.h). Both first cut the text at special tokens (special_tokens.h); the text in
// between is encoded by the family's algorithm. Streaming detokenization: stream_decoder.h.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ggml-like/gguf/gguf.h"
#include "src/tokenizer/special_tokens.h"
#include "src/tokenizer/vocab.h"

namespace latte {

class Tokenizer {
 public:
  // Throws ggl::Error naming the file when the model carries no usable tokenizer: no
  // `tokenizer.ggml.model`, the value "none" (models made only for token-id input), or a family
  // this engine does not implement.
  static std::unique_ptr<Tokenizer> from_gguf(const ggl::GgufFile& file);
  static std::unique_ptr<Tokenizer> from_metadata(const ggl::Metadata& md);
  // Whether from_metadata would find a tokenizer family to build (the value is not "none").
  static bool has_tokenizer(const ggl::Metadata& md);

  virtual ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids for `text` (any bytes; not required to be valid UTF-8). add_bos puts the BOS token
  // first (error if the vocabulary has none). parse_special: text spelling a control token, such
  // as "<|endoftext|>", becomes that token; otherwise it is encoded as ordinary text.
  // User-defined tokens are always matched.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;

  // The bytes a token stands for (possibly an incomplete UTF-8 sequence). Control and unknown
  // tokens give their text when render_special, else nothing. Throws for ids out of range.
  const std::string& token_to_piece(int32_t id, bool render_special = true) const;

  const std::string& token_text(int32_t id) const;  // as stored in the vocabulary
  TokenType token_type(int32_t id) const;
  int32_t n_vocab() const { return vocab_.size(); }
  int32_t bos() const { return vocab_.bos; }  // -1 when the vocabulary has none
  int32_t eos() const { return vocab_.eos; }
  int32_t eot() const { return vocab_.eot; }
  bool is_eog(int32_t id) const { return vocab_.is_eog(id); }
  const std::vector<int32_t>& eog_ids() const { return vocab_.eog; }
  bool add_bos_default() const { return vocab_.add_bos; }
  // SentencePiece vocabularies that prefix text with a space: a decoder drops it again.
  bool add_space_prefix() const { return vocab_.add_space_prefix; }
  TokenizerKind kind() const { return vocab_.kind; }
  const std::string& source() const { return vocab_.source; }
  // A one-line description, e.g. "BPE, 102400 tokens, pre-tokenizer deepseek-llm".
  virtual std::string describe() const = 0;

 protected:
  explicit Tokenizer(Vocab vocab);
  // Appends the tokens of a stretch of plain text (no special tokens in it). `after_special` is
  // true at the start of the input and right after a special token.
  virtual void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const = 0;

  const Vocab& vocab() const { return vocab_; }

 private:
  Vocab vocab_;
  SpecialTokenMatcher specials_;
  std::vector<std::string> pieces_;  // token_to_piece(id, true), computed once
  std::string empty_;
};

}  // namespace latte
