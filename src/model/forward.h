// The forward pass as a compute graph: one graph per evaluated batch of tokens, reading the
// cached state of earlier tokens and writing the batch's own state into the cache.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "ggml-like/graph/graph.h"
#include "ggml-like/backend/backend.h"
#include "src/model/kv_cache.h"
#include "src/model/model.h"

namespace latte {

// How MLA attention is computed.
//   absorb: W_UK is folded into each head's query and W_UV applied after attention; the cached
//           latents are attended directly (MQA over [latent ; rope key] rows). Used for decode.
//   naive:  the latents of all visible tokens are expanded into per-head K and V (through
//           attn_kv_b or attn_k_b/attn_v_b) and ordinary multi-head attention runs on them.
//   auto:   absorb for single-token steps; for batches, whichever costs less time by a model of
//           multiply-adds (naive for a prefill without a long cached prefix).
enum class MlaMode { kAuto, kAbsorb, kNaive };
std::string_view mla_mode_name(MlaMode m);
std::optional<MlaMode> parse_mla_mode(std::string_view s);

// How many times more multiply-adds per second than the float32 attention kernels two parts of
// the MLA forms run at: the latent up-projections (matrix products with attn_kv_b or
// attn_k_b/attn_v_b; more than 1 where they take the integer GEMM) and each form's attention (the
// naive form's per-head MHA, the absorbed form's heads on one latent cache; more than 1 where they
// run on 16-bit integers).
struct MlaSpeeds {
  double latent_gemm = 1.0;
  double naive_attention = 1.0;
  double absorbed_attention = 1.0;
};

// The path a batch takes (kAbsorb or kNaive) for this request.
MlaMode choose_mla_path(const Hparams& hp, int64_t n_tokens, int64_t n_past, MlaMode requested, MlaSpeeds speeds = {});
// The speeds for a model on the backend that runs it, from the type of its latent up-projection
// weights and its head sizes.
MlaSpeeds mla_speeds(const Model& model, const ggl::Backend& backend);

struct ForwardBatch {
  std::span<const int32_t> tokens;  // validated ids
  int64_t n_past = 0;               // cached tokens before this batch (positions start here)
  bool all_logits = true;           // false: only the last token's logits
  MlaMode mla_path = MlaMode::kAbsorb;
};

// Appends the forward pass to g; returns the logits [n_vocab, n_tokens] (or [n_vocab, 1]),
// marked as a graph output. The batch must fit: n_past + n_tokens <= cache.n_ctx(). The weight
// leaves point where `weights` says (default: the model's own, in the file's mapping; a session
// with offload passes its copy whose placed tensors point into a device's buffers).
ggl::Tensor* build_forward(ggl::Graph& g, const Model& model, const KvCache& cache, const ForwardBatch& batch,
                           const ModelWeights* weights = nullptr);

// One sequence's share of a step over several: its next tokens (validated ids), at positions
// n_past.. of its own cache.
struct SequenceBatch {
  const KvCache* cache = nullptr;
  std::span<const int32_t> tokens;
  int64_t n_past = 0;
  MlaMode mla_path = MlaMode::kAbsorb;
};

// Data parallelism (docs/scale-out.md): this process's tokens of a step are [first, first + n)
// of `total`, the tokens of every process of the job in process order; each MoE layer's router and
// experts take all of them (Graph::token_gather) and give this process's rows back.
struct GatheredTokens {
  int64_t first = 0;
  int64_t total = 0;
};

// One step over several sequences: the tokens of all of them go through every weight product
// together (a matrix's or an expert's weights are read once for the whole step), and attention
// runs per sequence over its own cache, each with its own path. Returns every token's logits
// [n_vocab, total tokens] (all_logits) or each sequence's last token's [n_vocab, sequences], the
// sequences in the order given, marked as a graph output. With one sequence the graph is
// build_forward's. With `gathered`, the MoE layers take every process's tokens.
ggl::Tensor* build_forward_sequences(ggl::Graph& g, const Model& model, std::span<const SequenceBatch> sequences,
                                     bool all_logits = true, const ModelWeights* weights = nullptr,
                                     const GatheredTokens* gathered = nullptr);
// A data-parallel step in which this process has no tokens (gathered.first's count is 0): its
// experts still serve the other processes' tokens at every MoE layer. Returns the last layer's
// node, marked as an output.
ggl::Tensor* build_expert_service(ggl::Graph& g, const Model& model, const GatheredTokens& gathered);

}  // namespace latte
