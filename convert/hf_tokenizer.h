// Hugging Face tokenizer files (tokenizer.json, tokenizer_config.json, chat templates) → GGUF
// `tokenizer.*` metadata.
//
// Two BPE flavours are understood:
//  - byte-level BPE (GPT-2 style, DeepSeek, Llama 3): tokenizer.ggml.model "gpt2" with the token
//    list, token types, merges and the pre-tokenizer name (`tokenizer.ggml.pre`), identified from
//    the Split regexes of tokenizer.json's pre_tokenizer;
//  - SentencePiece-style BPE with byte fallback (Llama 1/2, TinyStories): model "llama" with
//    per-token scores that reproduce the merge order.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "convert/json_file.h"
#include "ggml-like/gguf/gguf.h"

namespace latte::convert {

struct TokenizerOptions {
  // Overrides the identified tokenizer.ggml.pre (for byte-level BPE whose Split regexes are not
  // recognised).
  std::optional<std::string> pre;
};

// The pre-tokenizer name for a tokenizer.json (byte-level BPE); throws naming the regexes found
// when they match no known pre-tokenizer.
std::string identify_pre_tokenizer(const nlohmann::json& tokenizer_json, const std::string& source);

// Adds the tokenizer.* keys for the tokenizer files in `dir`. n_vocab is the number of rows of
// the token embedding: the token list is padded to it with "[PAD<id>]" tokens of type UNUSED, and
// a tokenizer with more tokens is an error. `config` supplies bos/eos ids when there is no
// tokenizer_config.json. Returns a one-line description ("llama (BPE, byte fallback), 512
// tokens"), or "" when the directory has no tokenizer.json (nothing is added then).
std::string add_tokenizer_metadata(const std::string& dir, const JsonObject& config, int64_t n_vocab,
                                   const TokenizerOptions& opts, ggl::Metadata& md);

}  // namespace latte::convert
