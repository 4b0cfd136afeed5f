// Matrix multiplications with weights of any type. The inner loops are matmul (dot.cpp), so
// faster kernels plug in there; this file only decides which rows and columns each thread takes.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ggml-like/cpu/op_thread.h"
#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/cpu/interleaved.h"
#include "ggml-like/graph/graph.h"
#include "ggml-like/quant/quant.h"

#include "ggml-like/cpu/simd/set_declarations.h"

namespace ggl::GGL_ISA {
namespace {

// Batch b (flattened over dims 2, 3 of the result) maps to a batch of an operand with fewer
// batches by integer division, as in ggml: consecutive result batches share an operand batch.
inline const uint8_t* batch_ptr(const Tensor& t, const Tensor& dst, int64_t b) {
  const int64_t b2 = b % dst.ne[2], b3 = b / dst.ne[2];
  return t.bytes() + (b2 / (dst.ne[2] / t.ne[2])) * t.nb[2] + (b3 / (dst.ne[3] / t.ne[3])) * t.nb[3];
}

// Rows a thread's share of an interleaved matrix is made of: whole groups.
int64_t row_unit(Type t) { return is_interleaved(t) ? kInterleavedRows : 1; }

// split_range over rows in whole units.
std::pair<int64_t, int64_t> split_rows(int64_t n, int64_t unit, int ith, int nth) {
  const auto [u0, u1] = split_range(n / unit, ith, nth);
  return {u0 * unit, u1 * unit};
}

// matmul (dot.h) over rows [row_begin, row_end) of w, which may be interleaved (then the range is
// whole groups): the float path reads plain rows, so each group is taken back first. Only
// products the integer GEMMs do not take come here (they take every interleaved matrix unless
// they are switched off, e.g. by a test comparing against float32).
void float_matmul(Type t, const uint8_t* w, int64_t rows, int64_t n, const float* x, int64_t x_stride, int64_t n_cols,
                  float* y, int64_t y_stride, int64_t row_begin, int64_t row_end) {
  if (!is_interleaved(t)) return matmul(t, w, rows, n, x, x_stride, n_cols, y, y_stride, row_begin, row_end);
  const size_t rb = row_bytes(t, n);
  thread_local std::vector<uint8_t> plain;
  plain.resize(kInterleavedRows * rb);
  for (int64_t r = row_begin; r < row_end; r += kInterleavedRows) {
    deinterleave_group(t, w + r * rb, plain.data(), n);
    matmul(plain_type(t), plain.data(), kInterleavedRows, n, x, x_stride, n_cols, y + r, y_stride, 0, kInterleavedRows);
  }
}

}  // namespace

// Batched products with quantized weights take an integer GEMM (int_gemm.h) from this many
// activation columns on: with fewer, unpacking a weight panel costs more than it saves.
constexpr int64_t kIntGemmMinCols = 8;
// Weights in an interleaved layout (cpu/interleaved.h) take the panels from this many columns on:
// their panels must first undo the interleaving of every group, which costs more than the rows
// path's decoding once per 4 columns until about here (docs/batching.md, "Interleaved rows").
constexpr int64_t kInterleavedPanelMinCols = 32;
constexpr int64_t kRowsPathMaxCols = std::max(kIntGemmMinCols, kInterleavedPanelMinCols);

int64_t panel_min_cols(Type w) { return is_backend_layout(w) ? kInterleavedPanelMinCols : kIntGemmMinCols; }

namespace {

// Which integer GEMM a product with `cols` activation columns takes, if any: 16-bit activations
// (close to float32), except in products the graph marks ActivationPrecision::kCoarse (graph.h:
// every mul_mat_id, i.e. a MoE's routed experts, and whatever else the model marks, its shared
// experts), which take 8-bit activations where a path has them: twice the multiply-add rate, where
// most of the work is, measured to keep the quantized fixtures as close to the exact result as the
// reference engine's own 8-bit matmuls (docs/cpu-kernels.md, "Which precision each product uses").
// Many columns go through the GEMM's panels, a few (a decode step) straight through the weight rows.
// Q4_0 / Q4_1 weights take the 8-bit GEMM at any number of columns. The K-quant / IQ4 / Q5 types and
// the grid i-quants (IQ1..IQ3) take it only on the rows path of a decode step (fewer than
// kIntGemmMinCols columns; Q8_K or Q8_0 columns, gemm_kquant.cpp), and the 16-bit GEMM for more:
// 8-bit activations in every decode product measured too far from the exact logits on the kquant and
// iquant fixtures (the same section).
// Batch-invariant graphs (graph.h) make neither choice by the number of columns: the 16-bit GEMM
// wherever it applies, and always its panels (a column's result on the rows path is rounded
// differently).
const IntGemm* int_gemm_for(const Tensor& w, const Tensor& x, ActivationPrecision precision, int64_t cols,
                            bool invariant) {
  if (x.type != Type::F32 || x.nb[0] != sizeof(float)) return nullptr;
  const bool coarse = precision == ActivationPrecision::kCoarse;
  const bool int16 = kInt16Gemm.supports(w.type, w.ne[0]);
  const bool k8 = coarse && ((!invariant && cols < kIntGemmMinCols) || !int16);
  if (k8 && kInt8KGemm.supports(w.type, w.ne[0])) return &kInt8KGemm;
  if (k8 && kInt8B32Gemm.supports(w.type, w.ne[0])) return &kInt8B32Gemm;
  if (coarse && kInt8Gemm.supports(w.type, w.ne[0])) return &kInt8Gemm;
  return int16 ? &kInt16Gemm : nullptr;
}

bool takes_panels(const IntGemm& gemm, Type w, int64_t cols, bool invariant) {
  return gemm.pack_panel != nullptr && (invariant || cols >= panel_min_cols(w));
}

// The path a product on `gemm` counts as (path_counts.h).
CpuPath path_of(const IntGemm& gemm) {
  if (&gemm == &kInt8Gemm) return CpuPath::kInt8Gemm;
  if (&gemm == &kInt8KGemm) return CpuPath::kInt8KRows;
  if (&gemm == &kInt8B32Gemm) return CpuPath::kInt8B32Rows;
  return CpuPath::kInt16Gemm;
}

// The integer path of a product: the team quantizes the activation columns into the shared work
// area, then each thread multiplies its own weight panels or rows by every column.
const IntGemm* int_gemm_for_mul_mat(const Tensor& dst, bool invariant) {
  return int_gemm_for(*dst.src[0], *dst.src[1], activation_precision(dst), dst.src[1]->ne[1], invariant);
}

int64_t column_count(const Tensor& x) { return x.ne[1] * x.ne[2] * x.ne[3]; }

size_t quantized_columns_bytes(const IntGemm& gemm, int64_t K, int64_t cols) {
  return scratch_size(gemm.column_bytes(K) * cols);
}

// Quantizes columns [0, cols) of x (column c at x_of(c)) into `out`, split across the team.
template <class ColumnOf>
void quantize_columns(const IntGemm& gemm, int64_t K, int64_t cols, ColumnOf x_of, uint8_t* out, const CpuThread& th) {
  const size_t cb = gemm.column_bytes(K);
  auto [c0, c1] = split_range(cols, th.ith, th.nth);
  for (int64_t c = c0; c < c1; ++c) gemm.quantize_column(x_of(c), K, out + c * cb);
  th.barrier();
}

// Unpacks `rows` weight rows into `panel` and multiplies them by `cols` quantized activation
// columns: column c is at column_of(c), its output starts at y_of(c).
template <class ColumnOf, class OutputOf>
void multiply_columns(const IntGemm& gemm, Type t, const uint8_t* w, size_t row_stride, int64_t rows, int64_t K,
                      uint8_t* panel, int64_t cols, ColumnOf column_of, OutputOf y_of) {
  constexpr int64_t kBatch = 64;
  const void* xs[kBatch];
  float* ys[kBatch];
  gemm.pack_panel(t, w, row_stride, rows, K, panel);
  for (int64_t c0 = 0; c0 < cols; c0 += kBatch) {
    const int64_t count = std::min(kBatch, cols - c0);
    for (int64_t c = 0; c < count; ++c) {
      xs[c] = column_of(c0 + c);
      ys[c] = y_of(c0 + c);
    }
    gemm.multiply_panel(t, panel, rows, K, xs, ys, count);
  }
}

}  // namespace

size_t cpu_mul_mat_work(const Tensor& dst, int n_threads, bool batch_invariant) {
  const IntGemm* gemm = int_gemm_for_mul_mat(dst, batch_invariant);
  if (!gemm) return 0;
  const int64_t K = dst.src[0]->ne[0];
  return quantized_columns_bytes(*gemm, K, column_count(*dst.src[1])) +
         (takes_panels(*gemm, dst.src[0]->type, dst.src[1]->ne[1], batch_invariant)
              ? scratch_size(gemm->panel_bytes(K)) * n_threads
              : 0);
}

void cpu_mul_mat(const Tensor& dst, const CpuThread& th) {
  const Tensor& w = *dst.src[0];
  const Tensor& x = *dst.src[1];
  const int64_t K = w.ne[0], N = w.ne[1], M = x.ne[1];
  // Every activation column of every batch quantized once; column (c, batch xb) at xb * M + c.
  const IntGemm* gemm = int_gemm_for_mul_mat(dst, th.batch_invariant);
  if (gemm) count_path(path_of(*gemm), th);
  uint8_t* columns = th.work;
  const size_t cb = gemm ? gemm->column_bytes(K) : 0;
  if (gemm)
    quantize_columns(
        *gemm, K, column_count(x), [&](int64_t c) { return x.f32_row(c % M, c / M % x.ne[2], c / M / x.ne[2]); },
        columns, th);
  auto x_batch = [&](int64_t b) {
    const int64_t b2 = b % dst.ne[2], b3 = b / dst.ne[2];
    return b2 / (dst.ne[2] / x.ne[2]) + x.ne[2] * (b3 / (dst.ne[3] / x.ne[3]));
  };
  if (gemm && takes_panels(*gemm, w.type, M, th.batch_invariant)) {
    // (batch, panel) items per thread.
    uint8_t* panel =
        th.scratch<uint8_t>(scratch_size(gemm->panel_bytes(K)), quantized_columns_bytes(*gemm, K, column_count(x)));
    const int64_t panels = (N + kIntGemmPanelRows - 1) / kIntGemmPanelRows;
    auto [i0, i1] = split_range(panels * dst.ne[2] * dst.ne[3], th.ith, th.nth);
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t b = item / panels, p = item % panels;
      const int64_t b2 = b % dst.ne[2], b3 = b / dst.ne[2], xb = x_batch(b);
      const int64_t n0 = p * kIntGemmPanelRows, rows = std::min(kIntGemmPanelRows, N - n0);
      multiply_columns(
          *gemm, w.type, batch_ptr(w, dst, b) + n0 * w.nb[1], w.nb[1], rows, K, panel, M,
          [&](int64_t c) { return columns + (xb * M + c) * cb; },
          [&](int64_t c) { return dst.f32_row(c, b2, b3) + n0; });
    }
    return;
  }
  const int64_t batches = dst.ne[2] * dst.ne[3];
  const int64_t x_stride = static_cast<int64_t>(x.nb[1] / sizeof(float));
  // Threads take contiguous ranges of the flattened (batch, output row) space.
  auto [r0, r1] = split_rows(batches * N, row_unit(w.type), th.ith, th.nth);
  for (int64_t r = r0; r < r1;) {
    const int64_t b = r / N, n0 = r % N, n1 = std::min(N, n0 + (r1 - r));
    float* y = reinterpret_cast<float*>(dst.bytes() + b * dst.nb[2]);  // packed: dims 2, 3 flatten
    if (gemm) {                                                        // the few columns on the integer rows path
      const void* xs[kRowsPathMaxCols];
      float* ys[kRowsPathMaxCols];
      for (int64_t c = 0; c < M; ++c) {
        xs[c] = columns + (x_batch(b) * M + c) * cb;
        ys[c] = y + c * N + n0;
      }
      gemm->multiply_rows(w.type, batch_ptr(w, dst, b) + n0 * w.nb[1], w.nb[1], n1 - n0, K, xs, ys, M);
    } else {
      float_matmul(w.type, batch_ptr(w, dst, b), N, K, reinterpret_cast<const float*>(batch_ptr(x, dst, b)), x_stride,
                   M, y, N, n0, n1);
    }
    r += n1 - n0;
  }
}

// mul_mat_t: out[n, m] = sum_k w[n, k] x[k, m]. Items are (batch, chunk of output columns n);
// each weight row k is read once per item and added into every activation column (the block
// types in 16-bit integers where the set has them, transposed_int16.cpp; else decoded to
// floats). Chunks are whole rows when the batches alone keep the threads busy, else whole-block
// slices.
namespace {
int64_t transposed_chunk(const Tensor& dst, int nth) {
  const Tensor& w = *dst.src[0];
  const int64_t N = w.ne[0], batches = dst.ne[2] * dst.ne[3];
  const int64_t want = 2 * static_cast<int64_t>(nth);
  if (batches >= want) return N;
  const int64_t align = std::max<int64_t>(128, traits(w.type).block_size);
  const int64_t per_item = (N * batches + want - 1) / want;
  return std::min(N, (per_item + align - 1) / align * align);
}
}  // namespace

// Each item is one batch's range of output columns n0..n1 for every activation column: the
// weighted sum of the batch's K weight rows (their n0..n1 part), the weights x[k, m].
void cpu_mul_mat_t(const Tensor& dst, const CpuThread& th) {
  const Tensor& w = *dst.src[0];
  const Tensor& x = *dst.src[1];
  const int64_t N = w.ne[0], K = w.ne[1], M = x.ne[1];
  const int64_t chunk = transposed_chunk(dst, th.nth);
  const int64_t chunks = (N + chunk - 1) / chunk;
  const int64_t batches = dst.ne[2] * dst.ne[3];
  constexpr int64_t kCols = 8;  // activation columns per call
  auto [i0, i1] = split_range(batches * chunks, th.ith, th.nth);
  for (int64_t item = i0; item < i1; ++item) {
    const int64_t b = item / chunks;
    const int64_t n0 = (item % chunks) * chunk, n1 = std::min(N, n0 + chunk), len = n1 - n0;
    const uint8_t* wb = batch_ptr(w, dst, b) + row_bytes(w.type, n0);
    const uint8_t* xb = batch_ptr(x, dst, b);
    float* y = reinterpret_cast<float*>(dst.bytes() + b * dst.nb[2]);
    for (int64_t m0 = 0; m0 < M; m0 += kCols) {
      const int cols = static_cast<int>(std::min(kCols, M - m0));
      const float* a[kCols];
      float* ys[kCols];
      for (int c = 0; c < cols; ++c) {
        a[c] = reinterpret_cast<const float*>(xb + (m0 + c) * x.nb[1]);
        ys[c] = y + (m0 + c) * N + n0;
        std::memset(ys[c], 0, len * sizeof(float));
      }
      const bool integer = int_gemm_enabled() && add_weighted_rows_int16(w.type, wb, w.nb[1], K, len, a, ys, cols);
      if (!integer) add_weighted_rows(w.type, wb, w.nb[1], K, len, a, ys, cols);
      if (integer && item == i0 && m0 == 0) count_path(CpuPath::kTransposedInt16, th);
    }
  }
}

// mul_mat_id: every thread takes the same share of output rows of every expert in use and walks
// the (slot, token) pairs routed to that expert. An expert with enough pairs runs the integer GEMM
// over its weight panels (activation columns quantized once, up front, for all experts); one with
// few runs the integer rows path over its rows where the weights are block-quantized, else the
// float path in tiles, gathering the pairs' activation columns so each weight row is decoded once per tile.
namespace {
constexpr int64_t kIdTile = 8;

struct IdLayout {
  const IntGemm* gemm = nullptr;  // panels for experts with many pairs, rows for the others
  bool panels = false;            // whether any expert can have enough pairs for panels
  bool invariant = false;         // a batch-invariant graph's: panels for any number of pairs
  size_t shared = 0;              // quantized activation columns (integer path)
  size_t counts, pairs, xtile, ytile, panel, per_thread;
};

IdLayout id_layout(const Tensor& dst, bool invariant) {
  const Tensor& w = *dst.src[0];
  const Tensor& x = *dst.src[1];
  const Tensor& ids = *dst.src[2];
  const int64_t K = w.ne[0], E = w.ne[2], P = ids.ne[0] * ids.ne[1];
  IdLayout l{};
  l.gemm = int_gemm_for(w, x, activation_precision(dst), P, invariant);
  l.invariant = invariant;
  l.panels = l.gemm && takes_panels(*l.gemm, w.type, P, invariant);
  if (l.gemm) l.shared = quantized_columns_bytes(*l.gemm, K, x.ne[1] * x.ne[2]);
  l.counts = 0;
  l.pairs = scratch_size((2 * E + 1) * sizeof(int32_t));  // starts, then fill cursors
  l.xtile = l.pairs + scratch_size(P * sizeof(int32_t));
  l.ytile = l.xtile + scratch_size(kIdTile * K * sizeof(float));
  l.panel = l.ytile + scratch_size(kIdTile * w.ne[1] * sizeof(float));
  l.per_thread = l.panel + (l.panels ? scratch_size(l.gemm->panel_bytes(K)) : 0);
  return l;
}
}  // namespace

size_t cpu_mul_mat_id_work(const Tensor& dst, int n_threads, bool batch_invariant) {
  const IdLayout l = id_layout(dst, batch_invariant);
  return l.shared + l.per_thread * n_threads;
}

void cpu_mul_mat_id(const Tensor& dst, const CpuThread& th) {
  const Tensor& w = *dst.src[0];
  const Tensor& x = *dst.src[1];
  const Tensor& ids = *dst.src[2];
  const int64_t K = w.ne[0], N = w.ne[1], E = w.ne[2];
  const int64_t k_used = ids.ne[0], T = ids.ne[1], S = x.ne[1];
  const IdLayout l = id_layout(dst, th.batch_invariant);
  const ExpertRange only = expert_range(dst);  // the others' rows stay unwritten
  if (l.gemm) count_path(path_of(*l.gemm), th);
  uint8_t* columns = th.work;  // column (slot s, token t) at s + S * t
  if (l.gemm)
    quantize_columns(
        *l.gemm, K, S * T, [&](int64_t c) { return x.f32_row(c % S, c / S); }, columns, th);
  uint8_t* mine = th.work + l.shared + static_cast<size_t>(th.ith) * l.per_thread;
  auto* start = reinterpret_cast<int32_t*>(mine + l.counts);  // start[e] .. start[e+1]: pairs of expert e
  auto* pairs = reinterpret_cast<int32_t*>(mine + l.pairs);   // pair = slot + k_used * token
  auto* xt = reinterpret_cast<float*>(mine + l.xtile);
  auto* yt = reinterpret_cast<float*>(mine + l.ytile);

  // Counting sort of the pairs by expert (every thread builds the same table; it is tiny).
  std::fill(start, start + E + 1, 0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < k_used; ++i) {
      const int32_t e = ids.i32_row(t)[i];
      if (e >= 0 && e < E && only.holds(e, E)) ++start[e + 1];
    }
  for (int64_t e = 0; e < E; ++e) start[e + 1] += start[e];
  int32_t* fill = start + E + 1;
  std::copy(start, start + E, fill);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < k_used; ++i) {
      const int32_t e = ids.i32_row(t)[i];
      if (e >= 0 && e < E && only.holds(e, E)) pairs[fill[e]++] = static_cast<int32_t>(i + k_used * t);
    }

  const size_t rb = row_bytes(w.type, K);
  // Expert e's rows: in the weights, or where the pager put them (backend/paged_weights.h).
  const auto expert = [&](int64_t e) { return th.expert_slices ? th.expert_slices[e] : w.bytes() + e * w.nb[2]; };
  if (l.panels) {
    // Whole panels per thread; each routed expert's panels are unpacked once for all its pairs.
    const size_t cb = l.gemm->column_bytes(K);
    const int64_t panels = (N + kIntGemmPanelRows - 1) / kIntGemmPanelRows;
    auto [p0, p1] = split_range(panels, th.ith, th.nth);
    for (int64_t e = 0; e < E; ++e) {
      const int64_t count = start[e + 1] - start[e];
      if (count == 0 || !takes_panels(*l.gemm, w.type, count, l.invariant))
        continue;  // none, or on the rows path below
      const int32_t* ep = pairs + start[e];
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t n0 = p * kIntGemmPanelRows, rows = std::min(kIntGemmPanelRows, N - n0);
        multiply_columns(
            *l.gemm, w.type, expert(e) + n0 * rb, rb, rows, K, mine + l.panel, count,
            [&](int64_t c) { return columns + (ep[c] % k_used % S + S * (ep[c] / k_used)) * cb; },
            [&](int64_t c) { return dst.f32_row(ep[c] % k_used, ep[c] / k_used) + n0; });
      }
    }
  }

  auto [n0, n1] = split_rows(N, row_unit(w.type), th.ith, th.nth);
  if (n0 >= n1) return;
  const int64_t rows = n1 - n0;
  for (int64_t e = 0; e < E; ++e) {
    if (start[e + 1] == start[e]) continue;  // not routed here (a paged or another rank's expert: no slice)
    if (l.panels && takes_panels(*l.gemm, w.type, start[e + 1] - start[e], l.invariant)) continue;  // done above
    const uint8_t* we = expert(e) + n0 * rb;
    if (l.gemm) {
      const size_t cb = l.gemm->column_bytes(K);
      for (int64_t p0 = start[e]; p0 < start[e + 1]; p0 += kIdTile) {
        const int64_t cols = std::min<int64_t>(kIdTile, start[e + 1] - p0);
        const void* xs[kIdTile];
        float* ys[kIdTile];
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t slot = pairs[p0 + c] % k_used, t = pairs[p0 + c] / k_used;
          xs[c] = columns + (slot % S + S * t) * cb;
          ys[c] = dst.f32_row(slot, t) + n0;
        }
        l.gemm->multiply_rows(w.type, we, rb, rows, K, xs, ys, cols);
      }
      continue;
    }
    for (int64_t p0 = start[e]; p0 < start[e + 1]; p0 += kIdTile) {
      const int64_t cols = std::min<int64_t>(kIdTile, start[e + 1] - p0);
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t slot = pairs[p0 + c] % k_used, t = pairs[p0 + c] / k_used;
        std::memcpy(xt + c * K, x.f32_row(slot % S, t), K * sizeof(float));
      }
      float_matmul(w.type, we, rows, K, xt, K, cols, yt, rows, 0, rows);
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t slot = pairs[p0 + c] % k_used, t = pairs[p0 + c] / k_used;
        std::memcpy(dst.f32_row(slot, t) + n0, yt + c * rows, rows * sizeof(float));
      }
    }
  }
}

}  // namespace ggl::GGL_ISA
