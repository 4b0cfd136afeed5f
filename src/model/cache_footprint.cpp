#include "src/model/cache_footprint.h"

#include "src/model/kv_cache.h"

namespace latte {

KvCacheFootprint kv_cache_footprint(const ggl::GgufFile& file, ggl::Type t) {
  KvCacheFootprint f;
  f.hparams = read_hparams(file);
  f.type = t;
  const Hparams& hp = f.hparams;
  f.bytes_per_token = cache_bytes_per_token(hp, t);
  if (hp.is_mla()) {
    const size_t per_layer =
        static_cast<size_t>(hp.n_head) * (ggl::row_bytes(t, hp.head_dim_k) + ggl::row_bytes(t, hp.head_dim_v));
    f.per_head_kv_bytes_per_token = per_layer * static_cast<size_t>(hp.n_layer);
  } else {
    f.per_head_kv_bytes_per_token = f.bytes_per_token;
  }
  return f;
}

}  // namespace latte
