#include "src/model/kv_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

#include "ggml-like/core/error.h"
#include "src/model/page_pool.h"

namespace latte {

CacheLayout cache_layout(const Hparams& hp) {
  CacheLayout l;
  if (hp.is_mla()) {
    l.streams = 1;
    l.width[0] = hp.mla.kv_lora_rank + hp.mla.qk_rope;
  } else {
    l.streams = 2;
    l.width[0] = hp.n_head_kv * hp.head_dim_k;
    l.width[1] = hp.n_head_kv * hp.head_dim_v;
  }
  return l;
}

size_t cache_bytes_per_token(const Hparams& hp, ggl::Type t) {
  const CacheLayout l = cache_layout(hp);
  size_t per_layer = 0;
  for (int s = 0; s < l.streams; ++s) per_layer += ggl::row_bytes(t, l.width[s]);
  return per_layer * static_cast<size_t>(hp.n_layer);
}

void check_cache_type(const Hparams& hp, ggl::Type t) {
  switch (t) {
    case ggl::Type::F32:
    case ggl::Type::F16:
    case ggl::Type::BF16: return;
    case ggl::Type::Q8_0:
    case ggl::Type::Q4_0: {
      // Rows are written and read in parts (latent and rope key; per-head slices): each part
      // must be whole blocks.
      const int64_t parts[] = {hp.is_mla() ? hp.mla.kv_lora_rank : hp.head_dim_k,
                               hp.is_mla() ? hp.mla.qk_rope : hp.head_dim_v};
      for (int64_t p : parts)
        if (p % ggl::kQuantBlock != 0)
          ggl::fail("cache type {} needs row parts that are multiples of {} elements; this model has {}",
                    ggl::type_name(t), ggl::kQuantBlock, p);
      return;
    }
    default: ggl::fail("unsupported cache type {} (use one of {})", ggl::type_name(t), kCacheTypeNames);
  }
}

std::optional<ggl::Type> cache_type_from_name(std::string_view name) {
  const auto t = ggl::type_from_name(name);
  const ggl::Type cache_types[] = {ggl::Type::F32, ggl::Type::F16, ggl::Type::BF16, ggl::Type::Q8_0, ggl::Type::Q4_0};
  if (!t || std::find(std::begin(cache_types), std::end(cache_types), *t) == std::end(cache_types)) return std::nullopt;
  return t;
}

KvCache::KvCache(const Hparams& hp, int64_t n_ctx, ggl::Type type, const std::vector<ggl::Backend*>& device_of_layer)
    : layout_(cache_layout(hp)), type_(type), n_ctx_(n_ctx), n_layer_(hp.n_layer) {
  check_cache_type(hp, type);
  if (n_ctx <= 0) ggl::fail("context size {} must be positive", n_ctx);
  if (!device_of_layer.empty() && static_cast<int64_t>(device_of_layer.size()) != n_layer_)
    ggl::fail("cache: {} layer devices given for {} layers", device_of_layer.size(), n_layer_);
  if (std::any_of(device_of_layer.begin(), device_of_layer.end(), [](ggl::Backend* d) { return d != nullptr; }))
    device_ = device_of_layer;
  host_buffers_.resize(static_cast<size_t>(n_layer_ * layout_.streams));
  rows_.resize(host_buffers_.size());
  const auto stream_bytes = [&](int s) { return row_bytes(s) * static_cast<size_t>(n_ctx_); };

  // Device layers: one buffer per device, the layers' streams one after the other (aligned).
  constexpr size_t kAlign = 256;
  const auto aligned = [](size_t n) { return (n + kAlign - 1) / kAlign * kAlign; };
  std::vector<ggl::Backend*> devices;
  for (ggl::Backend* d : device_)
    if (d && std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
  for (ggl::Backend* d : devices) {
    size_t total = 0;
    for (int64_t il = 0; il < n_layer_; ++il)
      if (device_[il] == d)
        for (int s = 0; s < layout_.streams; ++s) total += aligned(stream_bytes(s));
    auto& buf = device_buffers_.emplace_back(d->allocate(total));
    size_t at = 0;
    for (int64_t il = 0; il < n_layer_; ++il)
      if (device_[il] == d)
        for (int s = 0; s < layout_.streams; ++s) {
          rows_[il * layout_.streams + s] = buf->base() + at;
          at += aligned(stream_bytes(s));
        }
  }
  for (int64_t il = 0; il < n_layer_; ++il) {
    if (device(il)) continue;
    for (int s = 0; s < layout_.streams; ++s) {
      const size_t bytes = stream_bytes(s);
      // Uninitialised on purpose: rows are written before they are read, and untouched pages of a
      // large context cost no memory.
      uint8_t* p = new (std::nothrow) uint8_t[bytes];
      if (!p) ggl::fail("cannot allocate {} bytes for the cache of a {}-token context", bytes, n_ctx_);
      host_buffers_[il * layout_.streams + s].reset(p);
      rows_[il * layout_.streams + s] = p;
    }
  }
}

KvCache::KvCache(const CachePagePool& pool, int64_t n_ctx)
    : layout_(pool.layout()), type_(pool.type()), n_ctx_(n_ctx), n_layer_(pool.n_layer()), pool_(&pool) {
  if (n_ctx <= 0) ggl::fail("context size {} must be positive", n_ctx);
  slots_ = (n_ctx + pool.page_tokens() - 1) / pool.page_tokens();
  rows_.assign(static_cast<size_t>(n_layer_ * layout_.streams), nullptr);
  for (size_t i = 0; i < rows_.size(); ++i) {
    const int stream = static_cast<int>(i % static_cast<size_t>(layout_.streams));
    try {
      rows_[i] = pool.reserve_window(stream, slots_);
    } catch (...) {
      release_windows();  // the destructor does not run for a constructor that throws
      throw;
    }
  }
}

KvCache::~KvCache() { release_windows(); }

void KvCache::release_windows() {
  if (!pool_) return;
  for (size_t i = 0; i < rows_.size(); ++i)
    if (rows_[i]) pool_->release_window(static_cast<int>(i % static_cast<size_t>(layout_.streams)), rows_[i], slots_);
  rows_.clear();
}

void KvCache::map_page(int64_t slot, int64_t page) const {
  const size_t part = static_cast<size_t>(pool_->page_tokens());
  for (int64_t il = 0; il < n_layer_; ++il)
    for (int s = 0; s < layout_.streams; ++s)
      pool_->map(page, il, s, data(il, s) + static_cast<size_t>(slot) * part * row_bytes(s));
}

void KvCache::unmap_page(int64_t slot) const {
  const size_t part = static_cast<size_t>(pool_->page_tokens());
  for (int64_t il = 0; il < n_layer_; ++il)
    for (int s = 0; s < layout_.streams; ++s)
      pool_->unmap(il, s, data(il, s) + static_cast<size_t>(slot) * part * row_bytes(s));
}

size_t KvCache::bytes_per_token() const {
  size_t per_layer = 0;
  for (int s = 0; s < layout_.streams; ++s) per_layer += row_bytes(s);
  return per_layer * static_cast<size_t>(n_layer_);
}

uint8_t* KvCache::data(int64_t layer, int stream) const { return rows_[layer * layout_.streams + stream]; }

void KvCache::read_rows(int64_t layer, int stream, int64_t first, int64_t n, void* host_dst) const {
  const size_t row = row_bytes(stream);
  const uint8_t* src = data(layer, stream) + static_cast<size_t>(first) * row;
  if (ggl::Backend* d = device(layer)) {
    d->download(host_dst, src, static_cast<size_t>(n) * row);
    d->synchronize();
  } else {
    std::memcpy(host_dst, src, static_cast<size_t>(n) * row);
  }
}

void KvCache::write_rows(int64_t layer, int stream, int64_t first, int64_t n, const void* host_src) const {
  const size_t row = row_bytes(stream);
  uint8_t* dst = data(layer, stream) + static_cast<size_t>(first) * row;
  if (ggl::Backend* d = device(layer)) {
    d->upload(dst, host_src, static_cast<size_t>(n) * row);
    d->synchronize();
  } else {
    std::memcpy(dst, host_src, static_cast<size_t>(n) * row);
  }
}

void KvCache::move_rows(int64_t layer, int stream, int64_t from, int64_t to, int64_t n) const {
  if (n <= 0 || from == to) return;
  if (!device(layer)) {
    const size_t row = row_bytes(stream);
    uint8_t* base = data(layer, stream);
    std::memmove(base + static_cast<size_t>(to) * row, base + static_cast<size_t>(from) * row,
                 static_cast<size_t>(n) * row);
    return;
  }
  // Through the host: a device has no overlapping in-place move in the interface.
  std::vector<uint8_t> rows(static_cast<size_t>(n) * row_bytes(stream));
  read_rows(layer, stream, from, n, rows.data());
  write_rows(layer, stream, to, n, rows.data());
}

ggl::Tensor* KvCache::tensor(ggl::Graph& g, int64_t layer, int stream) const {
  const int64_t ne[2] = {layout_.width[stream], n_ctx_};
  return g.external(type_, ne, data(layer, stream), fmt::format("cache.{}.{}", layer, stream));
}

}  // namespace latte
