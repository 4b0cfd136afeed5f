#include "src/cli/eval_text.h"

#include <algorithm>
#include <cstdio>

#include "ggml-like/core/error.h"
#include "src/cli/text_input.h"
#include "src/eval/perplexity.h"

namespace latte::cli {

std::vector<int32_t> text_file_tokens(const Tokenizer& tokenizer, const std::string& text_path) {
  return eval::text_tokens(tokenizer, without_final_newline(read_text_file(text_path, "text file")));
}

ChunkedText chunk_text_file(const Tokenizer& tokenizer, const std::string& text_path, const SessionFlags& flags,
                            int64_t max_chunks, int64_t skip_chunks) {
  ChunkedText t;
  t.tokens = text_file_tokens(tokenizer, text_path);
  t.n_ctx = flags.n_ctx != 0 ? flags.n_ctx : kDefaultEvalContext;
  if (skip_chunks > 0) {
    const auto n = static_cast<int64_t>(t.tokens.size());
    if ((skip_chunks + 2) * t.n_ctx > n)
      ggl::fail("--chunk {}: the text has {} tokens, which leaves fewer than two chunks of {} after the first {}",
                skip_chunks, n, t.n_ctx, skip_chunks);
    t.tokens.erase(t.tokens.begin(), t.tokens.begin() + skip_chunks * t.n_ctx);
  }
  t.n_chunk = eval::chunk_count(static_cast<int64_t>(t.tokens.size()), t.n_ctx, max_chunks);
  return t;
}

SessionOptions chunk_session_options(const SessionFlags& flags, int64_t n_ctx) {
  SessionOptions options = flags.options();
  options.n_ctx = n_ctx;
  options.n_batch = std::min(options.n_batch, n_ctx);
  return options;
}

void print_now(const std::string& s) {
  std::fputs(s.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace latte::cli
