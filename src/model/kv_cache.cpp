#include "src/model/kv_cache.h"

#include <fmt/format.h>

#include <new>

#include "ggml-like/core/error.h"

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
    case ggl::Type::Q8_0: {
      // Rows are written and read in parts (latent and rope key; per-head slices): each part
      // must be whole blocks.
      const int64_t parts[] = {hp.is_mla() ? hp.mla.kv_lora_rank : hp.head_dim_k,
                               hp.is_mla() ? hp.mla.qk_rope : hp.head_dim_v};
      for (int64_t p : parts)
        if (p % ggl::kQuantBlock != 0)
          ggl::fail("cache type q8_0 needs row parts that are multiples of {} elements; this model has {}",
                    ggl::kQuantBlock, p);
      return;
    }
    default: ggl::fail("unsupported cache type {} (use f32, f16, bf16 or q8_0)", ggl::type_name(t));
  }
}

KvCache::KvCache(const Hparams& hp, int64_t n_ctx, ggl::Type type)
    : layout_(cache_layout(hp)), type_(type), n_ctx_(n_ctx), n_layer_(hp.n_layer) {
  check_cache_type(hp, type);
  if (n_ctx <= 0) ggl::fail("context size {} must be positive", n_ctx);
  buffers_.resize(static_cast<size_t>(n_layer_ * layout_.streams));
  for (int64_t il = 0; il < n_layer_; ++il)
    for (int s = 0; s < layout_.streams; ++s) {
      const size_t bytes = row_bytes(s) * static_cast<size_t>(n_ctx_);
      // Uninitialised on purpose: rows are written before they are read, and untouched pages of a
      // large context cost no memory.
      uint8_t* p = new (std::nothrow) uint8_t[bytes];
      if (!p) ggl::fail("cannot allocate {} bytes for the cache of a {}-token context", bytes, n_ctx_);
      buffers_[il * layout_.streams + s].reset(p);
    }
}

size_t KvCache::bytes_per_token() const {
  size_t per_layer = 0;
  for (int s = 0; s < layout_.streams; ++s) per_layer += row_bytes(s);
  return per_layer * static_cast<size_t>(n_layer_);
}

uint8_t* KvCache::data(int64_t layer, int stream) const { return buffers_[layer * layout_.streams + stream].get(); }

ggl::Tensor* KvCache::tensor(ggl::Graph& g, int64_t layer, int stream) const {
  const int64_t ne[2] = {layout_.width[stream], n_ctx_};
  return g.external(type_, ne, data(layer, stream), fmt::format("cache.{}.{}", layer, stream));
}

}  // namespace latte
