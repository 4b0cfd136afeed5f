// Saving a session's cache to a file and loading it back, so a long conversation resumes without
// re-evaluating its tokens. With MLA the cache is the small latent, so the file is small too.
//
// File layout (little-endian):
//   header (kCacheFileHeaderBytes): magic "LATTEKV\0", u32 version, u32 architecture, u32 cache
//     element type (ggml id), u32 streams, i64 n_layer, i64 row width of each stream, i64 n_embd,
//     i64 n_vocab, u64 model file size, i64 n_tokens, u64 FNV-1a hash of the token ids
//   then for each layer, for each stream: the n_tokens rows, as stored in the cache.
// The header identifies the model (architecture, dimensions, file size) and the cache type; the
// token hash ties the rows to the token ids they were computed from (kept by the caller, e.g. in
// the conversation's JSON), so a cache never gets paired with the wrong text.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "src/runtime/session.h"

namespace latte {

inline constexpr size_t kCacheFileHeaderBytes = 88;

// Bytes of a cache file holding n_tokens of this session's cache: the header plus the rows.
size_t cache_file_bytes(const Session& session, int64_t n_tokens);

// Writes cache rows 0..tokens.size()-1; `tokens` are the ids held there (at most n_past). The
// file is written to a temporary name and renamed into place. Returns its size. Throws
// ggl::Error naming the file when it cannot be written.
size_t save_cache(const Session& session, std::span<const int32_t> tokens, const std::string& path);

// Replaces the session's cache with the file's rows (n_past becomes tokens.size()). Throws
// ggl::Error naming the file and the mismatch, leaving the session unchanged, when the file is
// not a latte cache, was made for another model or cache type, holds another number of tokens
// or other token ids, is truncated, or does not fit the context (a read error after those checks
// leaves the session empty). Returns the file's size.
size_t load_cache(Session& session, std::span<const int32_t> tokens, const std::string& path);

}  // namespace latte
