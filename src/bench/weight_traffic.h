// How many bytes of weights one generated token reads: the memory traffic that bounds decode
// speed on a CPU, where every weight used for a token streams in from DRAM once.
//
// Counted from the loaded tensors: every non-expert tensor of every layer (attention, norms,
// dense FFN, router, shared experts), the output norm and head, one row of the token embedding
// (a lookup, not a matmul), and for MoE layers expert_used_count / expert_count of each routed
// expert tensor (one token runs exactly that many distinct experts). A head tied to the
// embedding is counted once, whole, as the head.
#pragma once
#include <cstdint>

#include "ggml-like/core/types.h"
#include "src/model/model.h"

namespace latte::bench {

struct DecodeTraffic {
  uint64_t attention = 0;       // attention tensors and attn_norm of every layer (+ rope_freqs)
  uint64_t dense_ffn = 0;       // ffn_norm of every layer, the dense layers' gate/up/down
  uint64_t router = 0;          // ffn_gate_inp (+ exp_probs_b)
  uint64_t shared_experts = 0;  // ffn_*_shexp
  uint64_t routed_experts = 0;  // the used fraction of ffn_*_exps
  uint64_t output = 0;          // output_norm + output head
  uint64_t embedding_row = 0;   // one row of token_embd (0 when the head is the embedding)

  uint64_t total() const {
    return attention + dense_ffn + router + shared_experts + routed_experts + output + embedding_row;
  }
};

DecodeTraffic decode_weight_traffic(const Model& model);

// Bytes of the cache one decode step reads when `n_ctx` positions are cached (every layer's
// rows up to the current position), for cache elements of type t.
uint64_t cache_read_bytes(const Hparams& hp, ggl::Type t, int64_t n_ctx);

}  // namespace latte::bench
