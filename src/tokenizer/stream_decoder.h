// Streaming detokenization: text comes out as tokens arrive, and only ever valid UTF-8.
//
// A token may stand for part of a character (byte-level BPE pieces, SentencePiece <0xXX> byte
// tokens): those bytes are held back until the character is complete. Bytes that can never form
// a character (invalid UTF-8) are replaced by U+FFFD, one per maximal invalid subsequence.
// flush() at the end of a stream turns a still-incomplete character into one U+FFFD.
//
// For SentencePiece vocabularies that put a space before the text (add_space_prefix), the leading
// space of the first text piece of the stream (after BOS and other control tokens) is dropped, as
// llama.cpp and SentencePiece do, so "Once upon a time" decodes to itself.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "src/tokenizer/tokenizer.h"

namespace latte {

class StreamDecoder {
 public:
  struct Options {
    bool render_special = false;      // print control tokens (<s>, <|endoftext|>) as their text
    bool strip_leading_space = true;  // see above; off when continuing a stream mid-text
  };
  explicit StreamDecoder(const Tokenizer& tokenizer) : StreamDecoder(tokenizer, Options{}) {}
  StreamDecoder(const Tokenizer& tokenizer, Options options);

  // The text that became complete with this token (often empty, or several characters).
  std::string push(int32_t token);
  // Ends the stream: the held-back bytes of an unfinished character, as U+FFFD (or nothing).
  std::string flush();
  // Bytes held back waiting for the rest of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  Options options_;
  bool at_start_ = true;
  std::string pending_;
};

// Whole-sequence convenience: push every id, then flush.
std::string detokenize(const Tokenizer& tokenizer, std::span<const int32_t> ids, StreamDecoder::Options options = {});

}  // namespace latte
