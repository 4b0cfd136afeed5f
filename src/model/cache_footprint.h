// What caching costs per token for a model file: latte's cache (the MLA latent for deepseek2)
// against caching per-head K and V, for `latte info` and the tests.
#pragma once
#include <cstddef>

#include "ggml-like/gguf/gguf.h"
#include "ggml-like/core/types.h"
#include "src/model/hparams.h"

namespace latte {

struct KvCacheFootprint {
  Hparams hparams;
  ggl::Type type = ggl::Type::F16;
  // latte's cache, all layers: n_layer * (kv_lora + rope) elements for MLA,
  // n_layer * n_head_kv * (k_head + v_head) for llama.
  size_t bytes_per_token = 0;
  // Caching decompressed per-head K and V instead: n_layer * n_head * (k_head + v_head) elements
  // for MLA (k_head = nope + rope); for llama the same as bytes_per_token (it caches per KV head).
  size_t per_head_kv_bytes_per_token = 0;
  size_t bytes_per_token_and_layer() const { return bytes_per_token / hparams.n_layer; }
  size_t per_head_kv_bytes_per_token_and_layer() const { return per_head_kv_bytes_per_token / hparams.n_layer; }
};

// Reads the hyperparameters (throws ggl::Error like read_hparams) and sizes the cache for
// elements of type t (f32, f16, bf16, q8_0; q8_0 rows are counted in whole blocks).
KvCacheFootprint kv_cache_footprint(const ggl::GgufFile& file, ggl::Type t);

}  // namespace latte
