// The 8-bit integer products of the K-quant / IQ4 / Q5 / i-quant weight types (int_gemm.h), on the
// rows path only (no panels: IntGemm's panel members are null): op_matmul.cpp takes them for the
// routed experts of a decode step, and for Q2_K's routed experts (the 16-bit GEMM, which has the
// panels and takes these types elsewhere, does not take Q2_K). Two activation formats, as the
// reference engine's dot products take them (kquant_blocks.h, iquant_blocks.h):
//   kInt8KGemm:   Q8_K columns (256-value blocks: float d, int8 q, int16 sums per 16) for
//                 Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS and IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS,
//                 IQ2_S, IQ3_XXS, IQ3_S;
//   kInt8B32Gemm: Q8_0 columns (int8 q[n] | float d[n/32] | int32 qsum[n/32], parts 64-byte
//                 aligned; qsum = the block's quant sum) for Q5_0, Q5_1, IQ4_NL.
// The rows are walked as gemm_rows.h's are (row_walk.h).
#include <algorithm>
#include <cstring>

#include "ggml-like/core/fp16.h"
#include "ggml-like/cpu/arch/x86/kquant_blocks.h"
#if GGL_KQUANT_GEMM
#include "ggml-like/cpu/arch/x86/gemm_rows_x86.h"
#include "ggml-like/cpu/arch/x86/iquant_blocks.h"
#endif
#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/cpu/simd/row_walk.h"
#include "ggml-like/quant/quant.h"

#include "ggml-like/cpu/simd/set_declarations.h"

namespace ggl::GGL_ISA {
namespace {
#if GGL_KQUANT_GEMM

// ---- A row times C columns ----

using gemm_rows_x86::radd;
using gemm_rows_x86::RowF;
using gemm_rows_x86::rzero;
using gemm_rows_x86::sum_lanes;

// *out[c] = dot(row, column c) for C columns. Blocks alternate between two sets of accumulators
// (two independent FMA chains per column).
template <class Kind, int C>
void row_times_columns(const uint8_t* row, int64_t blocks, const typename Kind::Column* cols, float* const* out) {
  using Block = typename Kind::Block;
  const auto* w = reinterpret_cast<const Block*>(row);
  RowF acc[2][C];
  for (auto& set : acc)
    for (auto& a : set) a = rzero();
  int64_t b = 0;
  for (; b + 2 <= blocks; b += 2) {
    row_walk::prefetch_ahead<2 * sizeof(Block)>(w + b);
    Kind::template add<C>(w[b], cols, b, acc[0]);
    Kind::template add<C>(w[b + 1], cols, b + 1, acc[1]);
  }
  if (b < blocks) Kind::template add<C>(w[b], cols, b, acc[0]);
  for (int c = 0; c < C; ++c) *out[c] = sum_lanes(radd(acc[0][c], acc[1][c]));
}

// IntGemm::multiply_rows for one Kind (the walk: row_walk.h).
template <class Kind, class ViewOf>
void multiply_rows_of(const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, const void* const* columns,
                      float* const* y, int64_t n_cols, ViewOf view_of) {
  const int64_t blocks = n / Kind::kValues;
  using Column = typename Kind::Column;
  row_walk::walk<Column>(
      w, row_stride, rows, columns, y, n_cols, [&](const void* p) { return view_of(p, n); },
      [&]<int C>(const uint8_t* row, const Column* cols, float* const* out) {
        row_times_columns<Kind, C>(row, blocks, cols, out);
      });
}

// ---- kInt8KGemm: Q8_K activations ----

kquant::Q8KColumn q8k_view(const void* p, int64_t) { return static_cast<const BlockQ8_K*>(p); }

// Calls body.template operator()<Kind>() with the Kind of type t and returns true, or returns
// false where this GEMM does not take t.
template <class Body>
bool with_k_kind(Type t, Body&& body) {
  switch (t) {
    case Type::Q2_K: body.template operator()<kquant::KindQ2_K>(); return true;
    case Type::Q3_K: body.template operator()<kquant::KindQ3_K>(); return true;
    case Type::Q4_K: body.template operator()<kquant::KindQ4_K>(); return true;
    case Type::Q5_K: body.template operator()<kquant::KindQ5_K>(); return true;
    case Type::Q6_K: body.template operator()<kquant::KindQ6_K>(); return true;
    case Type::IQ4_XS: body.template operator()<kquant::KindIQ4_XS>(); return true;
    case Type::IQ2_XXS: body.template operator()<kquant::KindIquant<unpack16::IQ2_XXS>>(); return true;
    case Type::IQ2_XS: body.template operator()<kquant::KindIquant<unpack16::IQ2_XS>>(); return true;
    case Type::IQ2_S: body.template operator()<kquant::KindIquant<unpack16::IQ2_S>>(); return true;
    case Type::IQ3_XXS: body.template operator()<kquant::KindIquant<unpack16::IQ3_XXS>>(); return true;
    case Type::IQ3_S: body.template operator()<kquant::KindIquant<unpack16::IQ3_S>>(); return true;
    case Type::IQ1_S: body.template operator()<kquant::KindIquant<unpack16::IQ1_S>>(); return true;
    case Type::IQ1_M: body.template operator()<kquant::KindIquant<unpack16::IQ1_M>>(); return true;
    default: return false;
  }
}

bool k_supports(Type t, int64_t n) {
  return int_gemm_enabled() && with_k_kind(t, []<class>() {}) && n > 0 && n % kSuperBlock == 0;
}

size_t k_column_bytes(int64_t n) { return round64(n / kSuperBlock * sizeof(BlockQ8_K)); }

void k_quantize_column(const float* x, int64_t n, void* column) {
  quant::quantize_q8_k(x, static_cast<BlockQ8_K*>(column), n);
}

void k_multiply_rows(Type t, const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, const void* const* columns,
                     float* const* y, int64_t n_cols) {
  with_k_kind(t, [&]<class Kind>() { multiply_rows_of<Kind>(w, row_stride, rows, n, columns, y, n_cols, q8k_view); });
}

// ---- kInt8B32Gemm: Q8_0 activations ----

size_t b32_scales_bytes(int64_t n) { return round64(n / kQuantBlock * sizeof(float)); }

size_t b32_column_bytes(int64_t n) { return round64(n) + 2 * b32_scales_bytes(n); }

kquant::Q8Column b32_view(const void* p, int64_t n) {
  const auto* base = static_cast<const uint8_t*>(p);
  const size_t q = round64(n), s = b32_scales_bytes(n);
  return {reinterpret_cast<const int8_t*>(base), reinterpret_cast<const float*>(base + q),
          reinterpret_cast<const int32_t*>(base + q + s)};
}

bool b32_supports(Type t, int64_t n) {
  return int_gemm_enabled() && (t == Type::Q5_0 || t == Type::Q5_1 || t == Type::IQ4_NL) && n > 0 &&
         n % kQuantBlock == 0;
}

// Q8_0's quants and steps (the reference quantizer, fp16 steps included), with the quant sums.
void b32_quantize_column(const float* x, int64_t n, void* column) {
  auto* base = static_cast<uint8_t*>(column);
  const size_t qb = round64(n), s = b32_scales_bytes(n);
  auto* q = reinterpret_cast<int8_t*>(base);
  auto* d = reinterpret_cast<float*>(base + qb);
  auto* qsum = reinterpret_cast<int32_t*>(base + qb + s);
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    BlockQ8_0 block;
    quant::quantize_q8_0(x + b * kQuantBlock, &block, kQuantBlock);
    std::memcpy(q + b * kQuantBlock, block.qs, kQuantBlock);
    qsum[b] = 0;
    for (int8_t v : block.qs) qsum[b] += v;
    d[b] = fp16_to_f32(block.d);
  }
}

void b32_multiply_rows(Type t, const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, const void* const* columns,
                       float* const* y, int64_t n_cols) {
  auto run = [&]<class Kind>() { multiply_rows_of<Kind>(w, row_stride, rows, n, columns, y, n_cols, b32_view); };
  switch (t) {
    case Type::Q5_0: return run.template operator()<kquant::KindQ5_0>();
    case Type::Q5_1: return run.template operator()<kquant::KindQ5_1>();
    case Type::IQ4_NL: return run.template operator()<kquant::KindIQ4_NL>();
    default: return;  // supports() said no: never called
  }
}

#endif
}  // namespace

#if GGL_KQUANT_GEMM
const IntGemm kInt8KGemm{"int8-k", 127,     k_supports, k_column_bytes, k_quantize_column,
                         nullptr,  nullptr, nullptr,    k_multiply_rows};
const IntGemm kInt8B32Gemm{"int8-b32", 127,     b32_supports, b32_column_bytes, b32_quantize_column,
                           nullptr,    nullptr, nullptr,      b32_multiply_rows};
#else  // no AVX2
const IntGemm kInt8KGemm = unavailable_int_gemm("int8-k", 127);
const IntGemm kInt8B32Gemm = unavailable_int_gemm("int8-b32", 127);
#endif

}  // namespace ggl::GGL_ISA
