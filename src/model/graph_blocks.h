// Building blocks shared by the architectures' graphs: weight leaves, RMSNorm with its weight,
// SwiGLU feed-forward, DeepSeekMoE, and the output head.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "ggml-like/graph/graph.h"
#include "src/model/forward.h"
#include "src/model/hparams.h"
#include "src/model/weights.h"

namespace latte {

// One sequence's tokens in a step: the step's token columns [first, first + n_tokens), at
// positions n_past.. of its cache.
struct SequencePart {
  const KvCache* cache;
  int64_t first;
  int64_t n_tokens;
  int64_t n_past;
  MlaMode mla_path;
  int64_t n_kv() const { return n_past + n_tokens; }  // cache rows visible to the part
};

// What every layer builder needs to know about the step.
struct ForwardContext {
  ggl::Graph& g;
  const Model& model;
  const ModelWeights& weights;  // where the graph's weight leaves point (model's, or a device copy)
  const Hparams& hp;
  std::span<const SequencePart> parts;  // in token order, covering the step
  ggl::Tensor* tokens;                  // i32 [n_tokens]
  ggl::Tensor* positions;               // i32 [n_tokens]: each part's positions in turn
  int64_t n_tokens;
  bool all_logits;                 // false: only each part's last token's logits
  const GatheredTokens* gathered;  // data parallelism: the MoE layers take every process's tokens
};

// The columns of t (tokens along dimension dim) that belong to part p, as a view; t itself when
// p is the whole step. (A part's positions: part_columns(c, c.positions, p, 0).)
ggl::Tensor* part_columns(const ForwardContext& c, ggl::Tensor* t, const SequencePart& p, int dim);
// The parts' results joined along dimension dim, in part order.
ggl::Tensor* join_parts(ggl::Graph& g, const std::vector<ggl::Tensor*>& results, int dim);

// A weight as a graph leaf on the file's mapping.
ggl::Tensor* weight(ggl::Graph& g, WeightRef w);
// rms_norm(x) * w
ggl::Tensor* norm(ggl::Graph& g, ggl::Tensor* x, WeightRef w, float eps);
// down(silu(gate x) * (up x))
ggl::Tensor* swiglu_ffn(ggl::Graph& g, ggl::Tensor* x, WeightRef gate, WeightRef up, WeightRef down,
                        ggl::ActivationPrecision precision = ggl::ActivationPrecision::kFine);
// Routed experts (top-k by router score, SwiGLU each, weighted sum) plus shared experts.
// Two of its tensors carry names, one of each per MoE layer in layer order, for callers that look
// at the routing (SessionOptions::on_graph_built): the router logits f32 [E, T] = ffn_gate_inp x
// (x, its second source, is the normed hidden state the router reads) and the chosen experts
// i32 [k, T].
inline constexpr const char* kMoeRouterLogits = "ffn_moe_logits";
inline constexpr const char* kMoeChosenExperts = "ffn_moe_topk";
// Pre-gating, for a model whose routed experts are paged (docs/memory-budget.md): the next MoE
// layer's router reading this layer's hidden state, normed with the next layer's FFN norm. The
// experts it picks are a graph's prefetch hint, issued once this layer's own experts are in place,
// so that the next layer's are read while this one computes.
struct NextExperts {
  ggl::Tensor* x = nullptr;  // rms_norm(hidden) * next.ffn_norm
  const LayerWeights* layer = nullptr;
};
// The hint for next's experts (Graph::prefetch).
void prefetch_experts(ggl::Graph& g, const NextExperts& next, const MoeConfig& moe);
// Expert parallelism (expert_share.h): with `own` less than all the experts, the routed
// products compute the pairs routed to `own` and an expert_exchange node brings the other ranks';
// with `overlap`, the rows are sent first (expert_send) and the shared experts computed while they
// travel. With `gathered` (data parallelism), x holds this process's tokens only: the router and
// the routed experts take every process's (token_gather), and the result is x's rows; a process
// without tokens passes x = nullptr, and gets the exchange node, its experts having served the
// others.
ggl::Tensor* moe_ffn(ggl::Graph& g, ggl::Tensor* x, const LayerWeights& l, const MoeConfig& moe,
                     const NextExperts* next = nullptr, ggl::ExpertRange own = {}, bool overlap = true,
                     const GatheredTokens* gathered = nullptr);
// The rotation frequencies of the file's RoPE (base, linear or YaRN scaling) over the first n_rot
// dims, without any magnitude factor: the architectures add their YaRN temperature on top, and a
// cache shift re-rotates with exactly these.
ggl::RopeParams rope_frequencies(const Hparams& hp, int64_t n_rot);
// Final norm and output projection; only the last column when !all_logits.
ggl::Tensor* output_logits(const ForwardContext& c, ggl::Tensor* x);

// One architecture's whole pass; returns the logits.
ggl::Tensor* build_llama(const ForwardContext& c);
ggl::Tensor* build_deepseek2(const ForwardContext& c);

}  // namespace latte
