// Dropping cached tokens from the middle of a session without recomputing the ones after them.
//
// Only the rotary part of a cached row depends on the token's position: for MLA the shared rope
// key (the last qk_rope values of each row; the latent is position-free), for llama the first
// n_rot values of each K head (V rows carry no position). Rotary angles are linear in the
// position, so moving a row from position p to p - d is one more rotation by the angle of -d,
// computed by the graph's own rope op (same frequencies, YaRN ramp and per-pair factors as the
// forward pass).
//
// What this does NOT undo: in every layer after the first, a kept token's row was computed from
// hidden states that attended to the dropped tokens. The shifted cache is therefore exactly what a
// recomputation would give only for a single-layer model (and for layer 0 of any model); for deeper
// models it is the same approximation as llama.cpp's context shift. tests/src/runtime/test_session_cache.cpp
// measures both.
//
// Cache types: f32/f16/bf16 rows are rotated in f32 and rounded back; q8_0 rows are dequantized,
// rotated and requantized (each shift adds one more rounding of those blocks).
#pragma once
#include <cstdint>

#include "src/runtime/session.h"

namespace latte {

// Forgets cached tokens [begin, end) and moves tokens end..n_past-1 down to begin.., re-rotating
// their position-dependent values by -(end - begin). Afterwards n_past() is n_past - (end - begin).
// Throws ggl::Error unless 0 <= begin <= end <= n_past().
void remove_cached_tokens(Session& session, int64_t begin, int64_t end);

// The re-rotation graph: cache rows [begin, begin + m) of every layer rotated by `delta`
// positions in place (the session's offload planning also asks the device about its nodes).
void build_cache_rotation(ggl::Graph& g, const KvCache& cache, const Hparams& hp, const ModelWeights& weights,
                          int64_t begin, int64_t m, int64_t delta);

}  // namespace latte
