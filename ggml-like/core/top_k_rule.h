// The order top-k selects in (graph.h's top_k), shared by the CPU op and the CUDA kernel so that
// both pick the same indices: larger values first, ties to the lower index; in group-limited
// mode groups are ranked by the sum of their two largest values the same way.
#pragma once
#include <cmath>
#include <cstdint>

#include "ggml-like/core/host_device.h"

namespace ggl {

// Whether (va, ia) comes before (vb, ib).
GGL_HD bool topk_before(float va, int32_t ia, float vb, int32_t ib) { return va > vb || (va == vb && ia < ib); }

// A group's score: the sum of its two largest values (its value when it has one member).
GGL_HD float topk_group_score(const float* v, int64_t group) {
  float best = v[0], second = -INFINITY;
  for (int64_t j = 1; j < group; ++j) {
    if (v[j] > best) {
      second = best;
      best = v[j];
    } else if (v[j] > second) {
      second = v[j];
    }
  }
  return group > 1 ? best + second : best;
}

}  // namespace ggl
