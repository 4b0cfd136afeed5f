// Row-decoding kernels: get_rows, and weight rows dequantized to f32 for cuBLAS (the products with
// many columns). One thread decodes one group of 8 values (block_decode.h) and writes them; a
// grid-stride loop walks the flattened (row, group) space, so any row count fits the grid.
#include <algorithm>

#include "ggml-like/cuda/block_decode.h"
#include "ggml-like/cuda/matmul_kernels.h"

namespace ggl::cuda {
namespace {

using blocks::kGroup;

// Row r of a matrix at src with a byte stride, to a packed f32 matrix of rows of n.
struct StridedRows {
  const uint8_t* src;
  int64_t stride;
  float* out;
  int64_t n;
  __device__ const uint8_t* source(int64_t r) const { return src + r * stride; }
  __device__ float* target(int64_t r) const { return out + r * n; }
};

// Row r = (i, j2, j3) of get_rows' result: the table row its id names, or none (zeros).
struct GatheredRows {
  const uint8_t* table;
  Shape ts;
  const uint8_t* ids;
  Shape is;
  uint8_t* out;
  Shape os;
  __device__ const uint8_t* source(int64_t r) const {
    const int64_t i = r % os.ne[1], j2 = (r / os.ne[1]) % os.ne[2], j3 = r / (os.ne[1] * os.ne[2]);
    const int32_t id = *reinterpret_cast<const int32_t*>(ids + i * is.nb[0] + j2 * is.nb[1] + j3 * is.nb[2]);
    if (id < 0 || id >= ts.ne[1]) return nullptr;  // callers validate ids; never read outside the table
    return table + id * ts.nb[1] + (j2 % ts.ne[2]) * ts.nb[2] + (j3 % ts.ne[3]) * ts.nb[3];
  }
  __device__ float* target(int64_t r) const {
    const int64_t i = r % os.ne[1], j2 = (r / os.ne[1]) % os.ne[2], j3 = r / (os.ne[1] * os.ne[2]);
    return reinterpret_cast<float*>(out + i * os.nb[1] + j2 * os.nb[2] + j3 * os.nb[3]);
  }
};

template <class D, class Rows>
__global__ void decode_rows(Rows rows, int64_t n_rows, int64_t groups) {
  const int64_t total = n_rows * groups;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / groups, gi = i % groups;
    const uint8_t* src = rows.source(r);
    float v[kGroup];
    if (src) {
      blocks::decode_group<D>(src, gi, v);
    } else {
      for (int j = 0; j < kGroup; ++j) v[j] = 0.0f;
    }
    float* dst = rows.target(r) + gi * kGroup;
    for (int j = 0; j < kGroup; ++j) dst[j] = v[j];
  }
}

template <class Rows>
cudaError_t launch_decode_rows(Type t, const Rows& rows, int64_t n_rows, int64_t n, cudaStream_t stream) {
  const int64_t groups = n / kGroup, total = n_rows * groups;
  if (total == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>((total + kBlock - 1) / kBlock, int64_t{1} << 20));
  const bool known = blocks::with_decoder(
      t, [&](auto d) { decode_rows<decltype(d)><<<grid, kBlock, 0, stream>>>(rows, n_rows, groups); });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_dequantize_rows(Type t, const void* src, int64_t src_stride, int64_t rows, int64_t n, float* out,
                                   cudaStream_t stream) {
  return launch_decode_rows(t, StridedRows{static_cast<const uint8_t*>(src), src_stride, out, n}, rows, n, stream);
}

cudaError_t launch_get_rows(Type t, const void* table, Shape ts, const void* ids, Shape is, void* out, Shape os,
                            cudaStream_t stream) {
  const GatheredRows rows{static_cast<const uint8_t*>(table), ts, static_cast<const uint8_t*>(ids), is,
                          static_cast<uint8_t*>(out),         os};
  return launch_decode_rows(t, rows, os.ne[1] * os.ne[2] * os.ne[3], os.ne[0], stream);
}

}  // namespace ggl::cuda
