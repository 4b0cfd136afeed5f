// The transposed product (mul_mat_t: y[c] += sum over rows r of a[c][r] * row r) for Q4_0, Q8_0
// and the types of the 16-bit unpacking (unpack_kinds.h) in 16-bit integers, where the set has
// the steps (GGL_TRANSPOSED_INT16: the x86 sets, arch/x86/transposed_x86.h). MLA's decode takes
// it for every token: the query's absorption through the key half of attn_kv_b (16 heads x 128
// rows x 512 in DeepSeek-V2-Lite). The float path (dot.cpp) decodes every weight to a float and
// multiplies it once; here two rows' quants of a block go into 16-bit pairs and one multiply-add
// instruction takes 16 products, which measured about twice as fast as the float path
// (docs/cpu-speed.md, "Query absorption (mul_mat_t)").
//
// Rows go in groups of 16, block columns kColumns at a time: the group's activations times the
// block scales of its rows are quantized per block column (14 bits against the largest, as every
// 16-bit product here: docs/cpu-kernels.md), then each block column's 32 outputs add up in int32
// over the group and once in float per group. (Groups of 32 rows, with twice the rounding error,
// left ds3-tiny-q4_0 with chunks of 7 at mean KL 0.0440 against its 0.0438 threshold; that
// fixture's distances move between 0.018 and 0.040 under perturbations of this size.)
#include <algorithm>

#include "ggml-like/quant/legacy.h"
#include "ggml-like/cpu/arch/unpack_kinds.h"
#include "ggml-like/cpu/simd/gemm_steps.h"
#include "ggml-like/cpu/simd/set_declarations.h"

namespace ggl::GGL_ISA {

#if GGL_TRANSPOSED_INT16
namespace {

namespace steps = transposed_steps;
constexpr int64_t kGroupRows = 16;  // at most 32 (Prepared's pairs)
static_assert(kGroupRows <=
              2 * static_cast<int64_t>(sizeof(steps::Prepared::pairs) / sizeof(int32_t)) / steps::kColumns);

template <Type T>
constexpr size_t kBlockBytes = T == Type::Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
template <Type T>
constexpr int32_t kZeroPoint = T == Type::Q4_0 ? 8 : 0;
constexpr size_t kScaleBytes = sizeof(uint16_t);  // each block starts with its fp16 scale

// Rows [g, g + rows) (rows <= kGroupRows) times the C columns' activations there, added into
// block columns [j0, j0 + columns) (columns <= kColumns) of the outputs.
template <Type T, int C>
void add_group(const uint8_t* w, size_t row_stride, int64_t g, int rows, int64_t j0, int columns, const float* const* a,
               float* const* y) {
  const uint8_t* group = w + g * row_stride + j0 * kBlockBytes<T>;
  steps::Prepared prepared[C];
  for (int c = 0; c < C; ++c) steps::prepare(group, row_stride, kBlockBytes<T>, rows, columns, a[c] + g, prepared[c]);
  for (int k = 0; k < columns; ++k) {
    const uint8_t* qs = group + k * kBlockBytes<T> + kScaleBytes;
    steps::Sums sums[C];
    for (auto& s : sums) s = steps::zero();
    for (int r = 0; r < rows; r += 2) {
      // An odd last row pairs with itself: its partner's activation is 0.
      const uint8_t* q0 = qs + r * row_stride;
      const uint8_t* q1 = r + 1 < rows ? q0 + row_stride : q0;
      for (int c = 0; c < C; ++c) steps::add_pair<T>(sums[c], q0, q1, prepared[c].pairs[r / 2 * steps::kColumns + k]);
    }
    for (int c = 0; c < C; ++c)
      steps::finish(y[c] + (j0 + k) * kQuantBlock, sums[c], kZeroPoint<T> * prepared[c].qsum[k], prepared[c].scale[k]);
  }
}

// A group of rows at a time, all of its block columns before the next (the rows are one run of
// memory: the walk over them is sequential): group(g, rows, j0, columns) for rows [g, g + rows)
// (rows <= kGroupRows) and the 32-value block columns [j0, j0 + columns) (columns <= kColumns).
template <class Group>
void walk_groups(int64_t K, int64_t n, Group&& group) {
  const int64_t blocks = n / kQuantBlock;
  for (int64_t g = 0; g < K; g += kGroupRows) {
    const int rows = static_cast<int>(std::min(kGroupRows, K - g));
    for (int64_t j0 = 0; j0 < blocks; j0 += steps::kColumns)
      group(g, rows, j0, static_cast<int>(std::min<int64_t>(steps::kColumns, blocks - j0)));
  }
}

// The activation columns two at a time, then the last one alone: add.template operator()<C>(c)
// for C columns from column c.
template <class Add>
void by_column_pairs(int n_cols, Add&& add) {
  int c = 0;
  for (; c + 2 <= n_cols; c += 2) add.template operator()<2>(c);
  if (c < n_cols) add.template operator()<1>(c);
}

template <Type T>
void add_weighted_columns(const uint8_t* w, size_t row_stride, int64_t K, int64_t n, const float* const* a,
                          float* const* y, int n_cols) {
  by_column_pairs(n_cols, [&]<int C>(int c) {
    walk_groups(K, n, [&](int64_t g, int rows, int64_t j0, int columns) {
      add_group<T, C>(w, row_stride, g, rows, j0, columns, a + c, y + c);
    });
  });
}

// The types of unpack_kinds.h (K-quants, IQ4, Q5, i-quants): each block's sub-blocks of 32
// values unpack to int16 weights w with a float scale d and min m (value d * w + m, Q2_K's min
// skewed between its halves). kColumns sub-blocks (one super-block, or 8 blocks of 32) at a time:
// the group's rows unpack once into a buffer, the activations times each sub-block's scale are
// quantized per sub-block column as for Q4_0, and the mins add in float. |w| <= 4096
// (kquant_unpack.h), so a lane's sum over the group stays inside int32.
static_assert(kGroupRows * 4096 * static_cast<int64_t>(steps::kLevels) < (int64_t{1} << 31));

struct UnpackedRows {
  alignas(32) int16_t w[kGroupRows][steps::kColumns][kQuantBlock];
  float d[kGroupRows * steps::kColumns], m[kGroupRows * steps::kColumns], skew[kGroupRows * steps::kColumns];
};

// Rows [0, rows) of the group from `group`, sub-block columns [0, columns).
template <class Kind>
void unpack_rows(const uint8_t* group, size_t row_stride, int rows, int columns, UnpackedRows& u) {
  using Block = typename Kind::Block;
  constexpr int kPerBlock = static_cast<int>(Kind::kValues / kQuantBlock);
  if (columns < steps::kColumns)  // the lanes past the last column scale nothing
    for (float* v : {u.d, u.m, u.skew}) std::fill(v, v + rows * steps::kColumns, 0.0f);
  for (int r = 0; r < rows; ++r)
    for (int b = 0; b < columns / kPerBlock; ++b) {
      const Block& block = reinterpret_cast<const Block*>(group + r * row_stride)[b];
      const int first = r * steps::kColumns + b * kPerBlock;
      Kind::unpack(block, [&](int s, const auto& weights, float d, float m) {
        weights.store(u.w[r][b * kPerBlock + s]);
        u.d[first + s] = d;
        u.m[first + s] = m;
      });
      if constexpr (Kind::kHasSkew) Kind::skews(block, u.skew + first);
    }
}

// Rows [g, g + rows) times the C columns' activations there, added into sub-block columns
// [j0, j0 + columns) of the outputs.
template <class Kind, int C>
void add_unpacked_group(const uint8_t* w, size_t row_stride, int64_t g, int rows, int64_t j0, int columns,
                        const float* const* a, float* const* y, UnpackedRows& u) {
  constexpr int64_t kPerBlock = Kind::kValues / kQuantBlock;
  const uint8_t* group = w + g * row_stride + j0 / kPerBlock * sizeof(typename Kind::Block);
  unpack_rows<Kind>(group, row_stride, rows, columns, u);
  steps::Prepared prepared[C];
  float mins[C][steps::kColumns] = {}, skews[C][steps::kColumns] = {};
  for (int c = 0; c < C; ++c) {
    steps::prepare(u.d, rows, a[c] + g, prepared[c]);
    if constexpr (Kind::kHasMin) steps::weighted_mins(u.m, rows, a[c] + g, mins[c]);
    if constexpr (Kind::kHasSkew) steps::weighted_mins(u.skew, rows, a[c] + g, skews[c]);
  }
  for (int k = 0; k < columns; ++k) {
    steps::Sums sums[C];
    for (auto& s : sums) s = steps::zero();
    for (int r = 0; r < rows; r += 2) {
      // An odd last row pairs with itself: its partner's activation is 0.
      const int16_t* q0 = u.w[r][k];
      const int16_t* q1 = r + 1 < rows ? u.w[r + 1][k] : q0;
      for (int c = 0; c < C; ++c)
        steps::add_pair_words(sums[c], q0, q1, prepared[c].pairs[r / 2 * steps::kColumns + k]);
    }
    for (int c = 0; c < C; ++c)
      steps::finish_words(y[c] + (j0 + k) * kQuantBlock, sums[c], prepared[c].scale[k], mins[c][k] + skews[c][k],
                          mins[c][k] - skews[c][k]);
  }
}

template <class Kind>
void add_unpacked_columns(const uint8_t* w, size_t row_stride, int64_t K, int64_t n, const float* const* a,
                          float* const* y, int n_cols) {
  UnpackedRows u;
  by_column_pairs(n_cols, [&]<int C>(int c) {
    walk_groups(K, n, [&](int64_t g, int rows, int64_t j0, int columns) {
      add_unpacked_group<Kind, C>(w, row_stride, g, rows, j0, columns, a + c, y + c, u);
    });
  });
}

}  // namespace

bool add_weighted_rows_int16(Type t, const void* w, size_t row_stride, int64_t K, int64_t n, const float* const* a,
                             float* const* y, int n_cols) {
  if (n % kQuantBlock != 0) return false;
  const auto* wb = static_cast<const uint8_t*>(w);
  if (t == Type::Q4_0) return add_weighted_columns<Type::Q4_0>(wb, row_stride, K, n, a, y, n_cols), true;
  if (t == Type::Q8_0) return add_weighted_columns<Type::Q8_0>(wb, row_stride, K, n, a, y, n_cols), true;
  if (unpack16::block_values(t) == 0 || n % unpack16::block_values(t) != 0) return false;
  return unpack16::with_kind(t, [&]<class Kind>() { add_unpacked_columns<Kind>(wb, row_stride, K, n, a, y, n_cols); });
}

#else  // no steps for this set: the float path

bool add_weighted_rows_int16(Type, const void*, size_t, int64_t, int64_t, const float* const*, float* const*, int) {
  return false;
}

#endif

}  // namespace ggl::GGL_ISA
