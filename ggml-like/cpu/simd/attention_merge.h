// Merging the online-softmax states of slices of the keys: the attention kernels' split-keys mode
// (fewer query items than threads: each thread attends to a slice of the keys), and their
// batch-invariant form (slices at fixed key positions).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ggml-like/cpu/op_thread.h"

namespace ggl::GGL_ISA {

// The partial states of `parts` key slices for n queries, slice w at partials + w * stride: the
// running maxima m[n], the sums of exp(score - m) l[n], then the accumulators acc[n][Dv]. Writes
// query g's normalised output to out (Dv floats). An empty slice has l = 0 and is skipped.
inline void merge_partial_states(const float* partials, int64_t stride, int parts, int64_t n, int64_t Dv, int64_t g,
                                 float* out) {
  float m = -INFINITY;
  for (int w = 0; w < parts; ++w) m = std::fmax(m, partials[w * stride + g]);
  std::fill(out, out + Dv, 0.0f);
  float l = 0.0f;
  for (int w = 0; w < parts; ++w) {
    const float* part = partials + w * stride;
    if (part[n + g] == 0.0f) continue;
    const float c = std::exp(part[g] - m);
    l += part[n + g] * c;
    const float* acc = part + 2 * n + g * Dv;
    for (int64_t i = 0; i < Dv; ++i) out[i] += acc[i] * c;
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int64_t i = 0; i < Dv; ++i) out[i] *= inv;
}

// Batch-invariant attention (graph.h) cuts every query's keys at fixed multiples of this.
inline constexpr int64_t kInvariantKeyChunk = 256;

inline int64_t invariant_key_chunks(int64_t keys) {
  return std::max<int64_t>(1, (keys + kInvariantKeyChunk - 1) / kInvariantKeyChunk);
}

// Floats of the chunk states of one item of n queries over `keys` keys: per thread in
// attend_invariant's areas.
inline size_t invariant_area_floats(int64_t keys, int64_t n, int64_t Dv) {
  return static_cast<size_t>(invariant_key_chunks(keys) * n * (Dv + 2));
}

// Batch-invariant attention over `items` query items (n_of(item) queries each, seeing
// visible_of(item) keys): each chunk of kInvariantKeyChunk keys gets an online-softmax state of its
// own (partial(item, j0, j1, state) writes m[n], l[n], acc[n][Dv] at state), and the chunks' states
// merge in key order. With at least as many items as threads each thread takes whole items, their
// chunks one after another in its own area (areas + ith * area_floats); with fewer, the team splits
// each item's chunks and merges them in thread 0's area. Either way the same chunks merge in the
// same order, so a query's output depends neither on the thread count nor on the other items.
template <class Queries, class Visible, class Partial, class OutRow>
void attend_invariant(const CpuThread& th, float* areas, size_t area_floats, int64_t items, int64_t Dv, Queries&& n_of,
                      Visible&& visible_of, Partial&& partial, OutRow&& out_row) {
  auto chunk_keys = [](int64_t c, int64_t visible) {
    return std::pair<int64_t, int64_t>{c * kInvariantKeyChunk, std::min((c + 1) * kInvariantKeyChunk, visible)};
  };
  auto merge = [&](int64_t item, const float* states, int64_t g0, int64_t g1) {
    const int64_t n = n_of(item);
    const int parts = static_cast<int>(invariant_key_chunks(visible_of(item)));
    for (int64_t g = g0; g < g1; ++g) merge_partial_states(states, n * (Dv + 2), parts, n, Dv, g, out_row(item, g));
  };
  if (items >= th.nth) {
    float* mine = areas + th.ith * area_floats;
    auto [i0, i1] = split_range(items, th.ith, th.nth);
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t visible = visible_of(item), stride = n_of(item) * (Dv + 2);
      for (int64_t c = 0; c < invariant_key_chunks(visible); ++c) {
        const auto [j0, j1] = chunk_keys(c, visible);
        partial(item, j0, j1, mine + c * stride);
      }
      merge(item, mine, 0, n_of(item));
    }
    return;
  }
  for (int64_t item = 0; item < items; ++item) {
    const int64_t visible = visible_of(item), stride = n_of(item) * (Dv + 2);
    auto [c0, c1] = split_range(invariant_key_chunks(visible), th.ith, th.nth);
    for (int64_t c = c0; c < c1; ++c) {
      const auto [j0, j1] = chunk_keys(c, visible);
      partial(item, j0, j1, areas + c * stride);
    }
    th.barrier();
    auto [g0, g1] = split_range(n_of(item), th.ith, th.nth);
    merge(item, areas, g0, g1);
    th.barrier();
  }
}

}  // namespace ggl::GGL_ISA
