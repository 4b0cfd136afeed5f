// Matrix products from nodes: mul_mat, mul_mat_t and mul_mat_id with weights of every type
// block_decode.h decodes.
// - mul_mat with at most kMatVecMaxCols columns, and mul_mat_id (its pairs sorted by expert into
//   tiles of as many): the mat-vec kernels of op_matmul.cu, which read the weight blocks directly.
// - mul_mat with more columns, and mul_mat_t: cuBLAS's Sgemm; f32 weights directly, other types
//   dequantized to f32 chunk by chunk (at most kWorkCap bytes) into the backend's work buffer.
// In cuBLAS's column-major terms a packed [K, N] matrix is K x N with leading dimension nb[1] / 4.
#include <cublas_v2.h>

#include <algorithm>
#include <climits>

#include "ggml-like/core/error.h"
#include "ggml-like/cuda/block_decode.h"
#include "ggml-like/cuda/cuda_ops.h"
#include "ggml-like/cuda/matmul_kernels.h"
#include "ggml-like/graph/graph.h"

namespace ggl::cuda {
namespace {

constexpr size_t kWorkCap = size_t{64} << 20;  // dequantized weights per cuBLAS call

// Rows of n f32 values dequantized per chunk: as many as fit kWorkCap, at least one.
int64_t chunk_rows(int64_t rows, int64_t n) {
  if (n <= 0) return rows;
  return std::min(rows,
                  std::max<int64_t>(1, static_cast<int64_t>(kWorkCap / (static_cast<size_t>(n) * sizeof(float)))));
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

bool f32_rows(const Tensor* t) {
  if (!t || t->type != Type::F32 || !t->rows_contiguous()) return false;
  for (int d = 1; d < kMaxDims; ++d)
    if (t->nb[d] % sizeof(float) != 0) return false;
  return true;
}

// Weights whose rows of row_length values the kernels decode.
bool decodable(const Tensor& w, int64_t row_length) {
  const int values = blocks::decoder_values(w.type);
  return values > 0 && w.rows_contiguous() && row_length % values == 0;
}

int to_int(int64_t v) { return static_cast<int>(v); }  // after supports_matmul's fits_int checks

// Operand t's bytes for result batch b (dims 2, 3 flattened), broadcast as ggml does.
const uint8_t* batch_of(const Tensor& t, const Tensor& dst, int64_t b) {
  const int64_t b2 = b % dst.ne[2], b3 = b / dst.ne[2];
  return t.bytes() + (b2 / (dst.ne[2] / t.ne[2])) * t.nb[2] + (b3 / (dst.ne[3] / t.ne[3])) * t.nb[3];
}
float* batch_out(const Tensor& dst, int64_t b) {
  return reinterpret_cast<float*>(dst.bytes() + (b % dst.ne[2]) * dst.nb[2] + (b / dst.ne[2]) * dst.nb[3]);
}

int ld(size_t stride_bytes) { return to_int(static_cast<int64_t>(stride_bytes / sizeof(float))); }

void sgemm(cublasHandle_t h, cublasOperation_t op_a, int m, int n, int k, const void* a, int lda, const void* b,
           int ldb, float beta, float* c, int ldc) {
  const float one = 1.0f;
  const cublasStatus_t s = cublasSgemm(h, op_a, CUBLAS_OP_N, m, n, k, &one, static_cast<const float*>(a), lda,
                                       static_cast<const float*>(b), ldb, &beta, c, ldc);
  if (s != CUBLAS_STATUS_SUCCESS) fail("cuda: cublasSgemm failed ({})", static_cast<int>(s));
}

float* work_for(const Tensor& node, const MatmulWork& work) {
  if (work.bytes < matmul_work_bytes(node))
    fail("cuda: {} '{}' needs a larger work buffer", op_name(node.op), node.name);
  return static_cast<float*>(work.data);
}

// The cuBLAS path, per result batch: w's rows (w.ne[0] values each) as f32, in chunks of rows
// [r0, r0 + rows) with leading dimension lda: f32 weights whole and in place, other types
// dequantized into the work buffer chunk by chunk. product(a, lda, r0, rows, x, y) multiplies one.
template <class Product>
void over_weight_chunks(const Tensor& node, const MatmulWork& work, Product product) {
  const Tensor& w = *node.src[0];
  const Tensor& x = *node.src[1];
  const int64_t R = w.ne[1], L = w.ne[0];
  float* scratch = work_for(node, work);
  const int64_t chunk = chunk_rows(R, L);
  for (int64_t b = 0; b < node.ne[2] * node.ne[3]; ++b) {
    const uint8_t* wb = batch_of(w, node, b);
    const float* xb = reinterpret_cast<const float*>(batch_of(x, node, b));
    float* yb = batch_out(node, b);
    if (w.type == Type::F32) {
      product(wb, ld(w.nb[1]), 0, R, xb, yb);
      continue;
    }
    for (int64_t r0 = 0; r0 < R; r0 += chunk) {
      const int64_t rows = std::min(chunk, R - r0);
      check(launch_dequantize_rows(w.type, wb + r0 * w.nb[1], static_cast<int64_t>(w.nb[1]), rows, L, scratch,
                                   work.stream),
            "dequantize");
      product(scratch, to_int(L), r0, rows, xb, yb);
    }
  }
}

// mul_mat: out [N, M] = w [K, N]^T x [K, M]: a chunk of w's rows gives those rows of out.
void mul_mat_gemm(const Tensor& node, const MatmulWork& work) {
  const int K = to_int(node.src[0]->ne[0]), M = to_int(node.src[1]->ne[1]);
  const int ldx = ld(node.src[1]->nb[1]), ldy = ld(node.nb[1]);
  over_weight_chunks(node, work, [&](const void* a, int lda, int64_t r0, int64_t rows, const float* x, float* y) {
    sgemm(work.cublas, CUBLAS_OP_T, to_int(rows), M, K, a, lda, x, ldx, 0.0f, y + r0, ldy);
  });
}

// mul_mat_t: out [N, M] = w [N, K] x [K, M], w's K rows of N values an N x K column-major matrix:
// a chunk of its rows meets those rows of x, each chunk's product added (beta 1) to the first's.
void mul_mat_t_gemm(const Tensor& node, const MatmulWork& work) {
  const int N = to_int(node.src[0]->ne[0]), M = to_int(node.src[1]->ne[1]);
  const int ldx = ld(node.src[1]->nb[1]), ldy = ld(node.nb[1]);
  over_weight_chunks(node, work, [&](const void* a, int lda, int64_t r0, int64_t rows, const float* x, float* y) {
    sgemm(work.cublas, CUBLAS_OP_N, N, M, to_int(rows), a, lda, x + r0, ldx, r0 == 0 ? 0.0f : 1.0f, y, ldy);
  });
}

bool takes_mat_vec(const Tensor& node) { return node.op == Op::kMulMat && node.src[1]->ne[1] <= kMatVecMaxCols; }

}  // namespace

bool supports_matmul(const Tensor& node) {
  const Tensor* w = node.src[0];
  const Tensor* x = node.src[1];
  if (!w || !f32_rows(x) || !f32_rows(&node)) return false;
  switch (node.op) {
    case Op::kMulMat:
      if (!decodable(*w, w->ne[0])) return false;
      break;
    case Op::kMulMatT:
      if (!decodable(*w, w->ne[0]) || w->ne[1] == 0) return false;  // (K = 0 would leave the result unwritten)
      if (w->type == Type::F32 && !f32_rows(w)) return false;       // read in place by cuBLAS
      break;
    case Op::kMulMatId: {
      if (!expert_range(node).all(w->ne[2])) return false;  // part of the experts: the CPU's (expert parallelism)
      const Tensor* ids = node.src[2];
      return decodable(*w, w->ne[0]) && ids && ids->type == Type::I32 && ids->rows_contiguous() &&
             fits_int(ids->ne[0] * ids->ne[1]);
    }
    default: return false;
  }
  // cuBLAS takes int sizes and leading dimensions, and wants x's columns no closer than its rows
  // are long (the mat-vec kernels take any strides).
  if (!takes_mat_vec(node) && x->nb[1] < x->ne[0] * sizeof(float)) return false;
  for (int64_t v : {w->ne[0], w->ne[1], x->ne[1], static_cast<int64_t>(w->nb[1] / sizeof(float)),
                    static_cast<int64_t>(x->nb[1] / sizeof(float)), static_cast<int64_t>(node.nb[1] / sizeof(float))})
    if (!fits_int(v)) return false;
  return true;
}

size_t matmul_work_bytes(const Tensor& node) {
  if (node.op != Op::kMulMat && node.op != Op::kMulMatT && node.op != Op::kMulMatId) return 0;
  const Tensor& w = *node.src[0];
  if (node.op == Op::kMulMatId) return mat_vec_id_work_bytes(node.src[2]->ne[0] * node.src[2]->ne[1], w.ne[2]);
  if (takes_mat_vec(node) || w.type == Type::F32) return 0;
  // over_weight_chunks' chunk of w's rows.
  return static_cast<size_t>(chunk_rows(w.ne[1], w.ne[0]) * w.ne[0]) * sizeof(float);
}

void run_matmul(const Tensor& node, const MatmulWork& work) {
  const Tensor& w = *node.src[0];
  const Tensor& x = *node.src[1];
  if (node.n_elements() == 0) return;
  if (cublasSetStream(work.cublas, work.stream) != CUBLAS_STATUS_SUCCESS) fail("cuda: cublasSetStream failed");
  switch (node.op) {
    case Op::kMulMat:
      if (takes_mat_vec(node))
        check(launch_mat_vec(w.type, w.data, shape_of(w), x.data, shape_of(x), node.data, shape_of(node), work.stream),
              "mul_mat");
      else
        mul_mat_gemm(node, work);
      break;
    case Op::kMulMatT: mul_mat_t_gemm(node, work); break;
    case Op::kMulMatId: {
      const Tensor& ids = *node.src[2];
      check(launch_mat_vec_id(w.type, w.data, shape_of(w), x.data, shape_of(x), ids.data, shape_of(ids), node.data,
                              shape_of(node), work_for(node, work), work.stream),
            "mul_mat_id");
      break;
    }
    default: fail("cuda: {} is not a matrix product", op_name(node.op));
  }
}

}  // namespace ggl::cuda
