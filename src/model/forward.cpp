#include "src/model/forward.h"

#include <vector>

#include "ggml-like/error.h"
#include "ggml-like/int_gemm.h"
#include "src/model/graph_blocks.h"

namespace latte {

std::string_view mla_mode_name(MlaMode m) {
  switch (m) {
    case MlaMode::kAuto: return "auto";
    case MlaMode::kAbsorb: return "absorb";
    case MlaMode::kNaive: return "naive";
  }
  return "?";
}

std::optional<MlaMode> parse_mla_mode(std::string_view s) {
  for (MlaMode m : {MlaMode::kAuto, MlaMode::kAbsorb, MlaMode::kNaive})
    if (s == mla_mode_name(m)) return m;
  return std::nullopt;
}

MlaMode choose_mla_path(const Hparams& hp, int64_t n_tokens, int64_t n_past, MlaMode requested,
                        double gemm_speedup) {
  if (requested != MlaMode::kAuto) return requested;
  // A decode step never expands cached latents.
  if (n_tokens <= 1) return MlaMode::kAbsorb;
  // Time per head of the two paths in multiply-adds of the attention kernels (the projections
  // both share are left out): the up-projections of queries/outputs (absorb) or of every visible
  // latent (naive) count 1 / gemm_speedup each. Queries see on average n_past + n_tokens / 2 keys.
  const MlaConfig& m = hp.mla;
  const double T = static_cast<double>(n_tokens), N = static_cast<double>(n_past + n_tokens);
  const double keys = (static_cast<double>(n_past) + T / 2) * T;
  const double L = static_cast<double>(m.kv_lora_rank), R = static_cast<double>(m.qk_rope);
  const double nope = static_cast<double>(m.qk_nope), v = static_cast<double>(m.v_head_dim);
  const double absorb = T * L * (nope + v) / gemm_speedup + keys * (L + R + L);
  const double naive = N * L * (nope + v) / gemm_speedup + keys * (nope + R + v);
  return naive < absorb ? MlaMode::kNaive : MlaMode::kAbsorb;
}

double latent_gemm_speedup(const Model& model) {
  const Hparams& hp = model.hparams();
  if (hp.arch != Arch::kDeepseek2 || model.weights().layers.empty()) return 1.0;
  const LayerWeights& l = model.weights().layers.front();
  const auto* w = l.wkv_b ? l.wkv_b : l.wv_b;
  // The integer GEMM does twice the float kernels' multiply-adds per cycle, but expanding also
  // copies the latents and per-head keys: 1.3 is what measured on DeepSeek-V2-Lite Q4_0 (absorb
  // and naive prefill break even at ~140 tokens after 4096 cached ones, 2 threads; README).
  return w && ggl::kInt16Gemm.supports(w->type, hp.mla.kv_lora_rank) ? 1.3 : 1.0;
}

ggl::Tensor* build_forward(ggl::Graph& g, const Model& model, const KvCache& cache, const ForwardBatch& batch) {
  const int64_t T = static_cast<int64_t>(batch.tokens.size());
  if (T <= 0) ggl::fail("forward: empty batch");
  if (batch.n_past < 0 || batch.n_past + T > cache.n_ctx())
    ggl::fail("forward: {} tokens after {} cached ones exceed the context of {}", T, batch.n_past, cache.n_ctx());
  std::vector<int32_t> positions(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) positions[t] = static_cast<int32_t>(batch.n_past + t);
  const ForwardContext c{g, model, model.hparams(), cache, batch, g.input_i32(positions, "positions"), T,
                         batch.n_past + T};
  return model.hparams().arch == Arch::kLlama ? build_llama(c) : build_deepseek2(c);
}

}  // namespace latte
