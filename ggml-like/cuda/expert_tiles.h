// mul_mat_id's tiles: the (slot, token) pairs routed to each expert, sorted by expert and cut into
// runs of at most kTilePairs, so the mat-vec kernel reads an expert's rows once per run rather
// than once per pair. The kernel route_pairs (op_matmul.cu) counts the pairs per expert, runs
// make_expert_tiles in one thread, then places each pair at its expert's cursor; the host test
// (tests/ggml-like/cuda/test_cuda_block_decode.cpp) runs the same function.
#pragma once
#include <cstdint>

#include "ggml-like/core/host_device.h"

namespace ggl::blocks {

inline constexpr int kTilePairs = 8;

// A bound on the tiles of `pairs` pairs over `experts` experts: each expert's last run may be
// short, and no tile is empty (a decode step's few pairs launch no more than a tile each).
GGL_HD int64_t max_expert_tiles(int64_t pairs, int64_t experts) {
  const int64_t by_runs = pairs / kTilePairs + experts;
  return by_runs < pairs ? by_runs : pairs;
}

// From counts[e], the pairs routed to expert e: cursor[e] = where expert e's pairs start in the
// sorted list, and per tile three ints (expert, first pair in the sorted list, pairs). Returns the
// number of tiles (at most max_expert_tiles).
GGL_HD int32_t make_expert_tiles(const int32_t* counts, int64_t experts, int32_t* cursor, int32_t* tiles) {
  int32_t start = 0, tile = 0;
  for (int64_t e = 0; e < experts; ++e) {
    for (int32_t c = 0; c < counts[e]; c += kTilePairs, ++tile) {
      tiles[3 * tile] = static_cast<int32_t>(e);
      tiles[3 * tile + 1] = start + c;
      tiles[3 * tile + 2] = counts[e] - c < kTilePairs ? counts[e] - c : kTilePairs;
    }
    cursor[e] = start;
    start += counts[e];
  }
  return tile;
}

}  // namespace ggl::blocks
