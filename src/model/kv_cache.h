// The per-token state kept between evaluation steps, one buffer per layer and stream, rows of
// one element type (f32, f16, bf16 or q8_0).
//   MLA (deepseek2): one stream; a row per token = [normalised latent (kv_lora) ; rotated shared
//                    rope key (qk_rope)]. Nothing else is cached.
//   llama:           two streams, K and V; a row per token = n_head_kv * head_dim.
// Row t holds position t. Memory is reserved for n_ctx rows up front; pages are only touched
// as rows are written. A layer's buffers may live in a device backend's memory (offload): the
// layers placed on one device share one buffer of it, and rows move in and out through the
// backend (read_rows / write_rows / move_rows work for either kind of layer).
// The paged form (host memory only) holds no rows of its own: its windows show the pages of a
// CachePagePool (page_pool.h) that the owner maps into them, page slot k holding positions
// [k * page_tokens, (k + 1) * page_tokens).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "ggml-like/graph/graph.h"
#include "ggml-like/backend/backend.h"
#include "ggml-like/core/types.h"
#include "src/model/hparams.h"

namespace latte {

class CachePagePool;

struct CacheLayout {
  int streams = 1;
  int64_t width[2] = {0, 0};  // elements per row of each stream
};

CacheLayout cache_layout(const Hparams& hp);

// Bytes one token takes in the cache (all layers and streams) with elements of type t.
size_t cache_bytes_per_token(const Hparams& hp, ggl::Type t);

// Throws ggl::Error unless t can hold this model's cache rows (f32, f16, bf16, or q8_0 / q4_0
// when every row part is a whole number of 32-element blocks).
void check_cache_type(const Hparams& hp, ggl::Type t);
// The cache element types by their --cache-type names; nullopt for any other name.
inline constexpr std::string_view kCacheTypeNames = "f32, f16, bf16, q8_0, q4_0";
std::optional<ggl::Type> cache_type_from_name(std::string_view name);

class KvCache {
 public:
  // device_of_layer: per layer the device backend whose memory holds its cache, nullptr (or an
  // empty vector) for host memory. The backends must outlive the cache.
  KvCache(const Hparams& hp, int64_t n_ctx, ggl::Type type, const std::vector<ggl::Backend*>& device_of_layer = {});
  // The paged form: windows of n_ctx rows (rounded up to whole pages) over the pool's pages, none
  // mapped yet. The pool must outlive the cache.
  KvCache(const CachePagePool& pool, int64_t n_ctx);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  ggl::Type type() const { return type_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t n_layer() const { return n_layer_; }
  const CacheLayout& layout() const { return layout_; }
  size_t row_bytes(int stream) const { return ggl::row_bytes(type_, layout_.width[stream]); }
  size_t bytes_per_token() const;
  size_t total_bytes() const { return bytes_per_token() * static_cast<size_t>(n_ctx_); }

  // The first byte of a layer's stream: host memory, or the device's for a device layer.
  uint8_t* data(int64_t layer, int stream) const;
  // The device backend holding a layer's cache, nullptr when it is host memory.
  ggl::Backend* device(int64_t layer) const { return device_.empty() ? nullptr : device_[layer]; }
  // Rows [first, first + n) of a layer's stream to host memory and back, and moved within it
  // (overlap allowed), wherever the layer's memory is.
  void read_rows(int64_t layer, int stream, int64_t first, int64_t n, void* host_dst) const;
  void write_rows(int64_t layer, int stream, int64_t first, int64_t n, const void* host_src) const;
  void move_rows(int64_t layer, int stream, int64_t from, int64_t to, int64_t n) const;
  // Paged form: shows pool page `page` at page slot `slot` of every layer's and stream's window, or
  // nothing there (reading or writing it then faults).
  void map_page(int64_t slot, int64_t page) const;
  void unmap_page(int64_t slot) const;
  const CachePagePool* pool() const { return pool_; }

  // The whole buffer of a layer's stream as a graph leaf [width, n_ctx].
  ggl::Tensor* tensor(ggl::Graph& g, int64_t layer, int stream) const;

 private:
  void release_windows();  // the paged form's

  CacheLayout layout_;
  ggl::Type type_;
  int64_t n_ctx_;
  int64_t n_layer_;
  std::vector<ggl::Backend*> device_;                                // per layer; empty: every layer in host memory
  std::vector<std::unique_ptr<uint8_t[]>> host_buffers_;             // [layer * streams + stream]
  std::vector<std::unique_ptr<ggl::BackendBuffer>> device_buffers_;  // one per device
  std::vector<uint8_t*> rows_;                                       // [layer * streams + stream]
  const CachePagePool* pool_ = nullptr;                              // the paged form's pool
  int64_t slots_ = 0;                                                // the paged form's pages per window
};

}  // namespace latte
