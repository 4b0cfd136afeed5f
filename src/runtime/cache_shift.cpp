#include "src/runtime/cache_shift.h"

#include <vector>

#include "ggml-like/core/error.h"
#include "src/model/graph_blocks.h"

namespace latte {
namespace {

// Rows [begin, begin + m) of the rotated part of one layer's cache, as [dims, heads, m].
ggl::Tensor* rotated_rows(ggl::Graph& g, const KvCache& cache, const Hparams& hp, int64_t layer, int64_t begin,
                          int64_t m) {
  ggl::Tensor* t = cache.tensor(g, layer, 0);
  const size_t row = t->nb[1], at = static_cast<size_t>(begin) * row;
  if (hp.is_mla())  // the shared rope key after the latent
    return g.view(t, {hp.mla.qk_rope, 1, m, 1}, {t->nb[0], row, row, row * m},
                  at + ggl::row_bytes(cache.type(), hp.mla.kv_lora_rank));
  const size_t head = ggl::row_bytes(cache.type(), hp.head_dim_k);  // K heads, n_rot leading dims rotated
  return g.view(t, {hp.head_dim_k, hp.n_head_kv, m, 1}, {t->nb[0], head, row, row * m}, at);
}

}  // namespace

void build_cache_rotation(ggl::Graph& g, const KvCache& cache, const Hparams& hp, const ModelWeights& weights,
                          int64_t begin, int64_t m, int64_t delta) {
  const std::vector<int32_t> positions(static_cast<size_t>(m), static_cast<int32_t>(delta));
  ggl::Tensor* pos = g.input_i32(positions, "shift");
  const ggl::RopeParams rope = rope_frequencies(hp, hp.rope.n_rot);
  const WeightRef freq_w = hp.is_mla() ? nullptr : weights.rope_freqs;
  ggl::Tensor* freq = freq_w ? weight(g, freq_w) : nullptr;
  for (int64_t il = 0; il < cache.n_layer(); ++il) {
    ggl::Tensor* rows = rotated_rows(g, cache, hp, il, begin, m);
    g.copy(g.rope(g.cont(rows), pos, rope, freq), rows);
  }
}

void remove_cached_tokens(Session& session, int64_t begin, int64_t end) {
  const int64_t n = session.n_past();
  if (begin < 0 || begin > end || end > n) ggl::fail("cannot remove cached tokens [{}, {}) of {}", begin, end, n);
  const int64_t d = end - begin, m = n - end;
  if (d == 0) return;
  const KvCache& cache = session.cache();
  const Hparams& hp = session.model().hparams();

  for (int64_t il = 0; il < cache.n_layer(); ++il)
    for (int s = 0; s < cache.layout().streams; ++s) cache.move_rows(il, s, end, begin, m);
  session.truncate(n - d);
  if (m == 0) return;

  ggl::Graph g;
  build_cache_rotation(g, cache, hp, session.weights(), begin, m, -d);
  session.backend().compute(g);
}

}  // namespace latte
