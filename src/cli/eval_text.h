// What the evaluation commands (latte perplexity, latte imatrix) start from: the text's tokens as
// llama.cpp's tools make them, cut into chunks of -c tokens, and a session sized for one chunk.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/cli/flags/session_flags.h"
#include "src/runtime/session.h"
#include "src/tokenizer/tokenizer.h"

namespace latte::cli {

inline constexpr int64_t kDefaultEvalContext = 512;  // llama-perplexity's and llama-imatrix's -c

struct ChunkedText {
  std::vector<int32_t> tokens;  // the whole text's
  int64_t n_ctx = 0;            // tokens per chunk: -c, or kDefaultEvalContext
  int64_t n_chunk = 0;          // chunks evaluated (eval::chunk_count)
};

// The tokens of the text file at text_path (its last newline dropped, as llama.cpp reads -f).
std::vector<int32_t> text_file_tokens(const Tokenizer& tokenizer, const std::string& text_path);

// The text's tokens and chunks, after leaving out its first skip_chunks chunks (llama-imatrix's
// --chunk); a text shorter than two chunks (after those) is a ggl::Error.
ChunkedText chunk_text_file(const Tokenizer& tokenizer, const std::string& text_path, const SessionFlags& flags,
                            int64_t max_chunks, int64_t skip_chunks = 0);

// The flags' session options for chunks of n_ctx tokens: graphs of at most n_ctx tokens.
SessionOptions chunk_session_options(const SessionFlags& flags, int64_t n_ctx);

// Writes s to stdout at once (the running estimates interleave with a progress bar on stderr).
void print_now(const std::string& s);

}  // namespace latte::cli
