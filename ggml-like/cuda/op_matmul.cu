// Matrix-vector products that read the weights' blocks directly: one warp per output row, each lane
// decoding every 32nd group of 8 values of the row (block_decode.h: row_dot_lane) and multiplying
// it by up to 8 activation columns in f32, the lanes' sums combined with __shfl_xor_sync.
// Consecutive lanes read consecutive groups, so a warp reads a contiguous run of the row's blocks.
//
// Activations stay f32 (no q8_1 requantization as llama.cpp's mmvq does): the product then carries
// no activation rounding beyond the CPU's own, and a decode step is bound by the weight bytes,
// which are read once whatever the activations' format; the activation columns are small and come
// from L1/L2 for the many warps that share them.
//
// Which weight matrix and which columns a (row, z) pair uses is a Columns policy: batches of
// mul_mat (z = result batch, broadcast as ggml does) or mul_mat_id's tiles of pairs routed to one
// expert.
#include <algorithm>

#include "ggml-like/cuda/block_decode.h"
#include "ggml-like/cuda/expert_tiles.h"
#include "ggml-like/cuda/matmul_kernels.h"

namespace ggl::cuda {
namespace {

constexpr int kWarps = 4;     // output rows per thread block
constexpr int kMaxZ = 65535;  // gridDim.y's limit; a grid-stride loop takes the rest
static_assert(blocks::kTilePairs == kMatVecMaxCols, "a tile of mul_mat_id is one mat-vec launch's columns");

__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// mul_mat: z is the result batch (b2, b3); every column of x multiplies the batch's weights.
struct BatchedColumns {
  static constexpr bool kOneColumnKernel = true;  // a decode step's single column has its own kernel
  const uint8_t* w;
  Shape ws;
  const uint8_t* x;
  Shape xs;
  uint8_t* y;
  Shape ys;
  template <int kCols>
  __device__ int locate(int64_t z, const uint8_t*& wz, const float** xcols, float** ycols) const {
    const int64_t b2 = z % ys.ne[2], b3 = z / ys.ne[2];
    wz = w + (b2 / (ys.ne[2] / ws.ne[2])) * ws.nb[2] + (b3 / (ys.ne[3] / ws.ne[3])) * ws.nb[3];
    const uint8_t* xz = x + (b2 / (ys.ne[2] / xs.ne[2])) * xs.nb[2] + (b3 / (ys.ne[3] / xs.ne[3])) * xs.nb[3];
    const int m = static_cast<int>(xs.ne[1]);
    for (int c = 0; c < kCols && c < m; ++c) {
      xcols[c] = reinterpret_cast<const float*>(xz + c * xs.nb[1]);
      ycols[c] = reinterpret_cast<float*>(y + c * ys.nb[1] + b2 * ys.nb[2] + b3 * ys.nb[3]);
    }
    return m;
  }
};

// mul_mat_id: z is a tile of up to kCols (slot i, token t) pairs routed to one expert (route_pairs);
// its weights times x[:, i % S, t] for each. Tiles past the count route_pairs made do nothing.
struct RoutedColumns {
  static constexpr bool kOneColumnKernel = false;  // tiles of up to kTilePairs columns
  const uint8_t* w;
  Shape ws;
  const uint8_t* x;
  Shape xs;
  int64_t slots;         // ids.ne[0]
  const int32_t* pairs;  // pair = slot + slots * token, sorted by expert
  const int32_t* tiles;  // (expert, first pair, count) per tile
  const int32_t* n_tiles;
  uint8_t* y;
  Shape ys;
  template <int kCols>
  __device__ int locate(int64_t z, const uint8_t*& wz, const float** xcols, float** ycols) const {
    if (z >= *n_tiles) return 0;
    const int32_t* tile = tiles + 3 * z;
    wz = w + tile[0] * ws.nb[2];
    const int m = min(tile[2], kCols);
    for (int c = 0; c < m; ++c) {
      const int64_t p = pairs[tile[1] + c], i = p % slots, t = p / slots;
      xcols[c] = reinterpret_cast<const float*>(x + (i % xs.ne[1]) * xs.nb[1] + t * xs.nb[2]);
      ycols[c] = reinterpret_cast<float*>(y + i * ys.nb[1] + t * ys.nb[2]);
    }
    return m;
  }
};

// Sorts mul_mat_id's pairs by expert (one thread block, expert_tiles.h): counts with atomics,
// thread 0 makes the offsets and the tiles, then each pair takes a place in its expert's run. The
// order within a run is arbitrary, which changes nothing: each pair's result is computed alone.
__global__ void route_pairs(const uint8_t* ids, Shape is, int64_t experts, int32_t* work, int64_t max_tiles) {
  const int64_t n_pairs = is.ne[0] * is.ne[1];
  int32_t* counts = work;              // experts
  int32_t* cursor = counts + experts;  // experts
  int32_t* pairs = cursor + experts;   // n_pairs
  int32_t* tiles = pairs + n_pairs;    // 3 * max_tiles
  int32_t* n_tiles = tiles + 3 * max_tiles;
  const auto expert_of = [&](int64_t p) {
    return *reinterpret_cast<const int32_t*>(ids + (p % is.ne[0]) * is.nb[0] + (p / is.ne[0]) * is.nb[1]);
  };
  for (int64_t e = threadIdx.x; e < experts; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  for (int64_t p = threadIdx.x; p < n_pairs; p += blockDim.x) {
    const int32_t e = expert_of(p);
    if (e >= 0 && e < experts) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) *n_tiles = blocks::make_expert_tiles(counts, experts, cursor, tiles);
  __syncthreads();
  for (int64_t p = threadIdx.x; p < n_pairs; p += blockDim.x) {
    const int32_t e = expert_of(p);
    if (e >= 0 && e < experts) pairs[atomicAdd(&cursor[e], 1)] = static_cast<int32_t>(p);
  }
}

template <class D, int kCols, class Columns>
__global__ void __launch_bounds__(32 * kWarps)
    mat_vec(Columns cols, int64_t n_rows, int64_t k, int64_t row_stride, int64_t n_z) {
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.y;
  if (n >= n_rows) return;  // the whole warp leaves together: no shuffle is left waiting
  for (int64_t z = blockIdx.y; z < n_z; z += gridDim.y) {
    const uint8_t* w = nullptr;
    const float* xs[kCols];
    float* ys[kCols];
    const int m = cols.template locate<kCols>(z, w, xs, ys);
    float acc[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[c] = 0.0f;
    if (w) blocks::row_dot_lane<D, kCols>(w + n * row_stride, k, xs, m, lane, 32, acc);
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      if (c >= m) break;
      const float sum = warp_sum(acc[c]);
      if (lane == 0) ys[c][n] = sum;
    }
  }
}

// One launch over n_rows rows and n_z (row set, column set) pairs of at most max_cols columns.
template <class Columns>
cudaError_t launch_columns(Type wt, const Columns& cols, int64_t n_rows, int64_t k, int64_t row_stride, int64_t n_z,
                           int64_t max_cols, cudaStream_t stream) {
  if (max_cols < 1 || max_cols > kMatVecMaxCols) return cudaErrorInvalidValue;
  if (n_rows == 0 || n_z == 0) return cudaSuccess;
  const dim3 block(32, kWarps);
  const dim3 grid(static_cast<unsigned>((n_rows + kWarps - 1) / kWarps),
                  static_cast<unsigned>(std::min<int64_t>(n_z, kMaxZ)));
  const bool known = blocks::with_decoder(wt, [&](auto d) {
    using D = decltype(d);
    if constexpr (Columns::kOneColumnKernel) {
      if (max_cols == 1) {
        mat_vec<D, 1><<<grid, block, 0, stream>>>(cols, n_rows, k, row_stride, n_z);
        return;
      }
    }
    mat_vec<D, static_cast<int>(kMatVecMaxCols)><<<grid, block, 0, stream>>>(cols, n_rows, k, row_stride, n_z);
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_mat_vec(Type wt, const void* w, Shape ws, const void* x, Shape xs, void* y, Shape ys,
                           cudaStream_t stream) {
  const BatchedColumns cols{static_cast<const uint8_t*>(w), ws, static_cast<const uint8_t*>(x), xs,
                            static_cast<uint8_t*>(y),       ys};
  return launch_columns(wt, cols, ws.ne[1], ws.ne[0], ws.nb[1], ys.ne[2] * ys.ne[3], xs.ne[1], stream);
}

cudaError_t launch_mat_vec_id(Type wt, const void* w, Shape ws, const void* x, Shape xs, const void* ids, Shape is,
                              void* y, Shape ys, void* work, cudaStream_t stream) {
  const int64_t n_pairs = is.ne[0] * is.ne[1], experts = ws.ne[2];
  if (n_pairs == 0 || ws.ne[1] == 0) return cudaSuccess;
  const int64_t max_tiles = blocks::max_expert_tiles(n_pairs, experts);
  int32_t* sorted = static_cast<int32_t*>(work);
  route_pairs<<<1, kBlock, 0, stream>>>(static_cast<const uint8_t*>(ids), is, experts, sorted, max_tiles);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  int32_t* pairs = sorted + 2 * experts;
  int32_t* tiles = pairs + n_pairs;
  const RoutedColumns cols{static_cast<const uint8_t*>(w),
                           ws,
                           static_cast<const uint8_t*>(x),
                           xs,
                           is.ne[0],
                           pairs,
                           tiles,
                           tiles + 3 * max_tiles,
                           static_cast<uint8_t*>(y),
                           ys};
  return launch_columns(wt, cols, ws.ne[1], ws.ne[0], ws.nb[1], max_tiles, kMatVecMaxCols, stream);
}

}  // namespace ggl::cuda
