// /save and /load: a conversation as JSON, and beside it the model's cache for its tokens, so a
// long conversation resumes without being evaluated again.
//
// FILE (JSON):
//   {"format": "latte-chat", "version": 1, "template": "deepseek2",
//    "model": {"architecture": "deepseek2", "file_bytes": 12345678},
//    "messages": [{"role": "user", "content": "...", "tokens": [...]}, ...],
//    "cache": {"file": "FILE.cache", "tokens": 412}}      (or "cache": null)
// FILE.cache: the rows of the cached tokens (src/runtime/cache_io.h), next to FILE.
// The token ids are saved with each message, so a loaded conversation continues with exactly the
// tokens that were evaluated; messages without "tokens" (a hand-written file) are rendered with
// the current template.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/chat/chat_session.h"

namespace latte {

struct SaveReport {
  size_t messages = 0;
  int64_t tokens = 0;        // in the conversation
  int64_t cache_tokens = 0;  // whose cache rows were saved (0: no cache file)
  std::string cache_path;
  size_t cache_bytes = 0;  // the cache file's size
  size_t row_bytes = 0;    // of which rows (the rest is the header)
};

struct LoadReport {
  size_t messages = 0;
  int64_t tokens = 0;
  int64_t cache_tokens = 0;  // restored from the cache file (0: to be evaluated on the next turn)
  size_t cache_bytes = 0;
  std::string note;  // why the cache was not used, a template difference, ...
};

// Throws ggl::Error naming the file when it cannot be written.
SaveReport save_chat(const ChatSession& chat, const std::string& path);
// Throws ggl::Error naming the file for unreadable or malformed JSON, leaving the chat unchanged.
// A cache file that does not fit (another model, cache type, tokens) is skipped with a note.
LoadReport load_chat(ChatSession& chat, const std::string& path);

}  // namespace latte
