// The cache memory of many sequences as one pool of fixed-size pages (the paged cache of vLLM,
// laid out for the CPU). A page holds the cache rows of page_tokens() consecutive tokens for every
// layer and stream; a sequence's KvCache (kv_cache.h, paged form) is a window of virtual memory per
// layer and stream in which the pages it owns are mapped one after the other, in the order of its
// tokens. So the graph and its kernels see each layer's rows contiguous, as with a plain cache,
// while the pages themselves sit anywhere in the pool and one page can be mapped into several
// sequences' windows at once (a shared prefix). The same idea as vAttention (Prabhu et al.,
// 2024), with the operating system's page tables as the page tables.
//
// The pool is one shared-memory file (memfd on Linux, an unlinked temporary file elsewhere), laid
// out per layer and stream: the part of page p for (layer, stream) sits at
// region(layer, stream) + p * page_tokens * row_bytes(stream), so consecutive pages mapped into
// consecutive window slots are one mapping for the kernel. Pages cost memory when first written.
// Which page is free, shared or cached is the caller's business (src/runtime/prefix_pages.h).
#pragma once
#include <cstddef>
#include <cstdint>

#include "ggml-like/core/types.h"
#include "src/model/hparams.h"
#include "src/model/kv_cache.h"

namespace latte {

class CachePagePool {
 public:
  // A pool of at least `tokens` tokens' rows (rounded up to whole pages) of cache type `type`.
  // page_tokens 0 chooses the page size (page_tokens_for); otherwise it is rounded up to the
  // nearest size whose parts are whole pages of the operating system. Throws ggl::Error for a
  // bad cache type, a non-positive size, or when the memory cannot be reserved.
  CachePagePool(const Hparams& hp, ggl::Type type, int64_t tokens, int64_t page_tokens = 0);
  ~CachePagePool();
  CachePagePool(const CachePagePool&) = delete;
  CachePagePool& operator=(const CachePagePool&) = delete;

  int64_t n_layer() const { return n_layer_; }
  ggl::Type type() const { return type_; }
  const CacheLayout& layout() const { return layout_; }
  int64_t page_tokens() const { return page_tokens_; }
  int64_t n_pages() const { return n_pages_; }
  size_t row_bytes(int stream) const { return ggl::row_bytes(type_, layout_.width[stream]); }
  // Bytes of one page over every layer and stream.
  size_t page_bytes() const;

  // Maps the part of `page` for (layer, stream) at `at`, which must be a window slot: page-aligned,
  // page_tokens() rows long, inside a reservation made by reserve_window().
  void map(int64_t page, int64_t layer, int stream, uint8_t* at) const;
  // Makes a window slot inaccessible again (whatever page was mapped there stays in the pool).
  void unmap(int64_t layer, int stream, uint8_t* at) const;
  // A window of `slots` page slots for one layer and stream, inaccessible until pages are mapped
  // into it, and its release.
  uint8_t* reserve_window(int stream, int64_t slots) const;
  void release_window(int stream, uint8_t* window, int64_t slots) const;

  // The page size the pool chooses for `tokens` tokens: the smallest whose parts are whole pages of
  // the operating system and at least 16 tokens, doubled while the pool's mappings (pages times
  // layers and streams) would take more than a quarter of the process's mapping limit
  // (vm.max_map_count).
  static int64_t page_tokens_for(const Hparams& hp, ggl::Type type, int64_t tokens);

 private:
  size_t part_bytes(int stream) const { return row_bytes(stream) * static_cast<size_t>(page_tokens_); }
  size_t region(int64_t layer, int stream) const;

  int64_t n_layer_ = 0;
  ggl::Type type_;
  CacheLayout layout_;
  int64_t page_tokens_ = 0;
  int64_t n_pages_ = 0;
  int fd_ = -1;
};

}  // namespace latte
