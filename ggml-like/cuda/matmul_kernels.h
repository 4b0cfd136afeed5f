// Launchers of the matrix-product and row-gather kernels (op_matmul.cu, op_get_rows.cu): weights
// of any type block_decode.h decodes, read block by block on the device; plain pointers and Shapes
// as in cuda_kernels.h. Each returns the launch's error. Row lengths must be multiples of the
// type's decoder block (blocks::decoder_values).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "ggml-like/core/types.h"
#include "ggml-like/cuda/cuda_kernels.h"
#include "ggml-like/cuda/expert_tiles.h"

namespace ggl::cuda {

// Columns up to which a product reads the quantized weights directly (mat-vec); more take
// dequantize_rows + cuBLAS.
constexpr int64_t kMatVecMaxCols = 8;

// mul_mat with few columns: y[n, m, b2, b3] = sum_k w[k, n, W] x[k, m, X] for m < x.ne[1] <= 8,
// w and x broadcast over dims 2, 3 as ggml does (result batch b maps to operand batch b / (B / W)).
// ws, xs, ys: shapes and byte strides of w (type wt), x (f32) and y (f32).
cudaError_t launch_mat_vec(Type wt, const void* w, Shape ws, const void* x, Shape xs, void* y, Shape ys,
                           cudaStream_t stream);

// mul_mat_id: y[:, i, t] = w[:, :, ids[i, t]] x[:, i % S, t] for slot i < ids.ne[0], token t <
// ids.ne[1], S = x.ne[1]; w [K, N, E] of type wt. The (slot, token) pairs are first sorted by
// expert on the device into tiles of up to kMatVecMaxCols pairs of one expert, so an expert's
// rows are read once per tile, not once per pair; work: mat_vec_id_work_bytes(pairs, E) bytes.
// A pair whose id is outside [0, E) is left unwritten (as on the CPU: callers validate ids).
cudaError_t launch_mat_vec_id(Type wt, const void* w, Shape ws, const void* x, Shape xs, const void* ids, Shape is,
                              void* y, Shape ys, void* work, cudaStream_t stream);
// Pairs by expert: counts and cursors (2E), the sorted pairs, the tiles (expert_tiles.h) and the
// tile count.
inline size_t mat_vec_id_work_bytes(int64_t pairs, int64_t experts) {
  return static_cast<size_t>(2 * experts + pairs + 3 * blocks::max_expert_tiles(pairs, experts) + 1) * sizeof(int32_t);
}

// rows rows of n values of type t, row r at src + r * src_stride bytes, to f32 at out + r * n.
cudaError_t launch_dequantize_rows(Type t, const void* src, int64_t src_stride, int64_t rows, int64_t n, float* out,
                                   cudaStream_t stream);

// get_rows: out[:, i, j2, j3] = table[:, ids[i, j2, j3], j2 % T2, j3 % T3] as f32; an id outside
// the table gives zeros. ts, is, os: shapes and byte strides of table (type t), ids (i32), out.
cudaError_t launch_get_rows(Type t, const void* table, Shape ts, const void* ids, Shape is, void* out, Shape os,
                            cudaStream_t stream);

}  // namespace ggl::cuda
