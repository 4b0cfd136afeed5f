#include "src/model/forward.h"

#include <vector>

#include "ggml-like/core/error.h"
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

MlaMode choose_mla_path(const Hparams& hp, int64_t n_tokens, int64_t n_past, MlaMode requested, MlaSpeeds speeds) {
  if (requested != MlaMode::kAuto) return requested;
  // A decode step never expands cached latents.
  if (n_tokens <= 1) return MlaMode::kAbsorb;
  // Time per head of the two paths in multiply-adds of the float32 attention kernels (the
  // projections both share are left out): the up-projections of queries/outputs (absorb) or of
  // every visible latent (naive) count 1 / speeds.latent_gemm each, the attention 1 /
  // speeds.naive_attention or 1 / speeds.absorbed_attention. Queries see on average n_past + n_tokens / 2 keys.
  const MlaConfig& m = hp.mla;
  const double T = static_cast<double>(n_tokens), N = static_cast<double>(n_past + n_tokens);
  const double keys = (static_cast<double>(n_past) + T / 2) * T;
  const double L = static_cast<double>(m.kv_lora_rank), R = static_cast<double>(m.qk_rope);
  const double nope = static_cast<double>(m.qk_nope), v = static_cast<double>(m.v_head_dim);
  const double absorb = T * L * (nope + v) / speeds.latent_gemm + keys * (L + R + L) / speeds.absorbed_attention;
  const double naive = N * L * (nope + v) / speeds.latent_gemm + keys * (nope + R + v) / speeds.naive_attention;
  return naive < absorb ? MlaMode::kNaive : MlaMode::kAbsorb;
}

MlaSpeeds mla_speeds(const Model& model, const ggl::Backend& backend) {
  const Hparams& hp = model.hparams();
  MlaSpeeds speeds;
  if (hp.arch != Arch::kDeepseek2 || model.weights().layers.empty()) return speeds;
  const LayerWeights& l = model.weights().layers.front();
  const auto* w = l.wkv_b ? l.wkv_b : l.wv_b;
  const MlaConfig& m = hp.mla;
  // The backend knows its kernels (the CPU's integer GEMM and 16-bit attention, fitted there).
  speeds.latent_gemm = backend.matmul_speed(w ? w->type : ggl::Type::F32, m.kv_lora_rank);
  speeds.naive_attention = backend.attention_speed(m.qk_nope + m.qk_rope, m.v_head_dim);
  speeds.absorbed_attention = backend.attention_speed(m.kv_lora_rank + m.qk_rope, m.kv_lora_rank, hp.n_head);
  return speeds;
}

namespace {

ggl::Tensor* build_step(ggl::Graph& g, const Model& model, std::span<const SequenceBatch> sequences, bool all_logits,
                        const ModelWeights* weights, const GatheredTokens* gathered) {
  if (sequences.empty()) ggl::fail("forward: no sequences");
  std::vector<int32_t> tokens, positions;
  std::vector<SequencePart> parts;
  for (const SequenceBatch& s : sequences) {
    const int64_t T = static_cast<int64_t>(s.tokens.size());
    if (T <= 0) ggl::fail("forward: empty batch");
    if (!s.cache) ggl::fail("forward: a sequence without a cache");
    if (s.n_past < 0 || s.n_past + T > s.cache->n_ctx())
      ggl::fail("forward: {} tokens after {} cached ones exceed the context of {}", T, s.n_past, s.cache->n_ctx());
    parts.push_back({s.cache, static_cast<int64_t>(tokens.size()), T, s.n_past, s.mla_path});
    tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
    for (int64_t t = 0; t < T; ++t) positions.push_back(static_cast<int32_t>(s.n_past + t));
  }
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  ggl::Tensor* all_positions = g.input_i32(positions, "positions");
  const ModelWeights& w = weights ? *weights : model.weights();
  if (gathered && (gathered->first < 0 || gathered->first + n_tokens > gathered->total))
    ggl::fail("forward: {} tokens at {} of the {} gathered are not a part of them", n_tokens, gathered->first,
              gathered->total);
  const ForwardContext c{
      g,        model,      w,       model.hparams(), parts, g.input_i32(tokens, "tokens"), all_positions,
      n_tokens, all_logits, gathered};
  if (gathered && model.hparams().arch != Arch::kDeepseek2)
    ggl::fail("forward: data parallelism needs a model with routed experts (deepseek2)");
  return model.hparams().arch == Arch::kLlama ? build_llama(c) : build_deepseek2(c);
}

}  // namespace

ggl::Tensor* build_forward(ggl::Graph& g, const Model& model, const KvCache& cache, const ForwardBatch& batch,
                           const ModelWeights* weights) {
  const SequenceBatch one{&cache, batch.tokens, batch.n_past, batch.mla_path};
  return build_step(g, model, {&one, 1}, batch.all_logits, weights, nullptr);
}

ggl::Tensor* build_forward_sequences(ggl::Graph& g, const Model& model, std::span<const SequenceBatch> sequences,
                                     bool all_logits, const ModelWeights* weights, const GatheredTokens* gathered) {
  return build_step(g, model, sequences, all_logits, weights, gathered);
}

ggl::Tensor* build_expert_service(ggl::Graph& g, const Model& model, const GatheredTokens& gathered) {
  const Hparams& hp = model.hparams();
  if (hp.arch != Arch::kDeepseek2) ggl::fail("forward: data parallelism needs a model with routed experts (deepseek2)");
  if (gathered.total <= 0 || gathered.first < 0 || gathered.first > gathered.total)
    ggl::fail("forward: no tokens at {} of the {} gathered to serve", gathered.first, gathered.total);
  ggl::Tensor* last = nullptr;
  const std::vector<LayerWeights>& layers = model.weights().layers;
  for (size_t il = 0; il < layers.size(); ++il)
    if (layers[il].is_moe())
      last = moe_ffn(g, nullptr, layers[il], hp.moe, nullptr, model.own_experts(static_cast<int64_t>(il)),
                     model.expert_share().overlap, &gathered);
  if (!last) ggl::fail("forward: the model has no MoE layer to serve");
  g.mark_output(last);
  return last;
}

}  // namespace latte
