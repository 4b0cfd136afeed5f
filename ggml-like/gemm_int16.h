// Integer GEMM for batched matrix multiplications with group-quantized weights (Q4_0, Q4_1,
// Q8_0): the prefill path. Activations are quantized per 32-element block to 16-bit integers
// with a float scale (15 bits of precision against the block's largest value, finer than fp16),
// weights are unpacked to 16-bit integers, and VPDPWSSD (AVX-512 VNNI) multiplies 32 pairs per
// instruction: twice the multiply-add rate of float32 FMA, at close to float32 accuracy.
//
// Weights are taken a panel of 32 rows at a time and transposed so that the 16 lanes of a vector
// hold 16 rows: one instruction adds a pair of activations into 16 row sums, the block scales
// apply to whole vectors once per block, and nothing is summed horizontally. A panel is unpacked
// once and reused by every activation column.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ggml-like/types.h"

namespace ggl::int16_gemm {

// Rows per panel.
inline constexpr int64_t kPanelRows = 32;

// Whether this build has the integer path, it is enabled, and it takes weights of type t with
// rows of n elements. Where it does not, callers use the float32 matmul (dot.h).
bool supports(Type t, int64_t n);

// Process-wide switch (on by default): off, every product takes the float32 path, e.g. to check
// that two mathematically equal forms of a computation agree to float32 rounding.
void set_enabled(bool on);

// One activation column of n elements (n a multiple of 32), quantized: int16 values, then a float
// scale and a float sum per block. column_bytes is a multiple of 64 so columns can be packed.
size_t column_bytes(int64_t n);
void quantize_column(const float* x, int64_t n, void* column);

// A panel of `rows` (<= kPanelRows) weight rows of type t, row_stride bytes apart, unpacked.
size_t panel_bytes(int64_t n);
void pack_panel(Type t, const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, void* panel);

// y[c][r] = dot(row r of the panel, column c) for r < rows, c < n_cols.
void multiply_panel(Type t, const void* panel, int64_t rows, int64_t n, const void* const* columns, float* const* y,
                    int64_t n_cols);

}  // namespace ggl::int16_gemm
