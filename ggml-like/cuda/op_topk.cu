// Top-k per row (mixture-of-experts routing): one warp per row. Group-limited mode first scores
// the groups (a lane per group, core/top_k_rule.h's topk_group_score) and keeps the best
// n_groups_used; then k rounds each pick the best candidate still allowed: every lane scans its
// strided share (topk_scan), the warp reduces with topk_before, and the winner is struck out.
// Same order as the CPU's partial_sort (larger first, ties to the lower index), so the same indices.
#include "ggml-like/cuda/cuda_op_kernels.h"

namespace ggl::cuda {
namespace {

constexpr int kWarp = 32;

// The warp's best (value, index) by topk_before; index -1 (none) loses to everything.
__device__ void warp_best(float& v, int32_t& i) {
  for (int o = kWarp / 2; o > 0; o /= 2) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (oi >= 0 && (i < 0 || topk_before(ov, oi, v, i))) {
      v = ov;
      i = oi;
    }
  }
}

// Shared memory: allowed flags of the n values, then (group mode) n_groups scores and flags.
__global__ void top_k_rows(const void* a, Shape as, void* out, Shape os, int k, int n_groups, int n_groups_used) {
  extern __shared__ uint8_t shared[];
  const int64_t n = as.ne[0], row = blockIdx.x;
  const int lane = threadIdx.x;
  const float* v = reinterpret_cast<const float*>(row_at(a, as, row));
  uint8_t* allowed = shared;
  float* scores = reinterpret_cast<float*>(shared + (n + 15) / 16 * 16);
  uint8_t* group_free = reinterpret_cast<uint8_t*>(scores + n_groups);

  if (n_groups <= 1) {
    for (int64_t j = lane; j < n; j += kWarp) allowed[j] = 1;
  } else {
    const int64_t group = n / n_groups;
    for (int g = lane; g < n_groups; g += kWarp) {
      scores[g] = topk_group_score(v + g * group, group);
      group_free[g] = 1;
    }
    for (int64_t j = lane; j < n; j += kWarp) allowed[j] = 0;
    __syncwarp();
    // The best n_groups_used groups (by score, ties to the lower group), their members allowed.
    for (int round = 0; round < n_groups_used; ++round) {
      float best_v = 0.0f;
      int32_t best_i = -1;
      topk_scan(scores, group_free, lane, n_groups, kWarp, best_v, best_i);
      warp_best(best_v, best_i);
      for (int64_t j = lane; j < group; j += kWarp) allowed[best_i * group + j] = 1;
      __syncwarp();
      if (lane == 0) group_free[best_i] = 0;
      __syncwarp();
    }
  }
  __syncwarp();
  int32_t* y = reinterpret_cast<int32_t*>(row_at(out, os, row));
  for (int round = 0; round < k; ++round) {
    float best_v = 0.0f;
    int32_t best_i = -1;
    topk_scan(v, allowed, lane, n, kWarp, best_v, best_i);
    warp_best(best_v, best_i);
    if (lane == 0) {
      y[round] = best_i;
      allowed[best_i] = 0;
    }
    __syncwarp();
  }
}

}  // namespace

cudaError_t launch_top_k(const void* a, Shape as, void* out, Shape os, int k, int n_groups, int n_groups_used,
                         cudaStream_t stream) {
  const int64_t n = as.ne[0];
  if (n > kTopKMaxValues) return cudaErrorInvalidValue;  // supports() declines longer rows
  const size_t shared = (n + 15) / 16 * 16 + static_cast<size_t>(n_groups) * (sizeof(float) + 1);
  top_k_rows<<<static_cast<unsigned>(rows_of(as)), kWarp, shared, stream>>>(a, as, out, os, k, n_groups, n_groups_used);
  return cudaGetLastError();
}

}  // namespace ggl::cuda
