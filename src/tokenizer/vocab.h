// The vocabulary of a model as stored in GGUF metadata (`tokenizer.ggml.*`): token texts, scores,
// types, special token ids and the flags that steer encoding.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ggml-like/gguf/gguf.h"

namespace latte {

// `tokenizer.ggml.token_type` values (as written by the GGUF converters).
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,      // <unk>
  kControl = 3,      // <s>, </s>, <|endoftext|>: never produced from text unless parsing specials
  kUserDefined = 4,  // always matched literally in the text before anything else
  kUnused = 5,
  kByte = 6,  // <0xXX> byte-fallback tokens of SentencePiece vocabularies
};

// The two tokenizer families of GGUF: `tokenizer.ggml.model` "gpt2" and "llama".
enum class TokenizerKind { kBytePairBpe, kSentencePiece };

struct Vocab {
  std::string source;  // the file (or metadata source) name, for messages
  TokenizerKind kind = TokenizerKind::kSentencePiece;
  std::string pre;  // `tokenizer.ggml.pre` ("" when absent)

  std::vector<std::string> texts;
  std::vector<float> scores;  // SentencePiece merge priorities (0 when absent)
  std::vector<TokenType> types;

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1;  // -1: the vocabulary has none
  std::vector<int32_t> eog;                                  // ids that end generation, sorted
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // SentencePiece: a space (▁) is put before text at the start

  int32_t size() const { return static_cast<int32_t>(texts.size()); }
  // The id of a token text, or -1. Duplicated texts resolve to the last id (as llama.cpp does).
  int32_t find(std::string_view text) const;
  bool is_eog(int32_t id) const;
  TokenType type(int32_t id) const { return types[static_cast<size_t>(id)]; }

  // Builds the text -> id index; call after filling `texts`.
  void index_texts();

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids_;
};

// Reads the vocabulary. Defaults for the special ids and flags depend on the kind (SentencePiece:
// BOS 1, EOS 2, UNK 0, add BOS, add space prefix; BPE: none of these), and the metadata keys
// override them; `bos_default` lets the BPE pre-tokenizer preset turn add_bos on (llama3).
// Throws ggl::Error naming the source for missing or inconsistent keys.
Vocab load_vocab(const ggl::Metadata& md, TokenizerKind kind, bool add_bos_default);

}  // namespace latte
