// Dot products of weight rows (any weight type) with float32 activations: the inner loop of
// every matrix multiplication. Weights are decoded to float on the fly, block by block; the
// activations stay float32 (they are never quantized here).
#pragma once
#include <cstdint>

#include "ggml-like/core/types.h"

namespace ggl {

// sum_i w[i] * x[i] over a row of n elements of type t (n a multiple of the block size).
float dot_row(Type t, const void* w_row, const float* x, int64_t n);

// y[r] = dot(row r of w, x) for r in [0, rows); rows are row_bytes(t, n) apart. Single-threaded:
// callers split rows across threads.
void matvec(Type t, const void* w, int64_t rows, int64_t n, const float* x, float* y);

// The batched form: several activation columns against one weight matrix, each weight row read
// (and decoded) once for all columns. For every column c in [0, n_cols) and row r in
// [row_begin, row_end):
//   y[c * y_stride + r] = dot(row r of w, x + c * x_stride)
// w has `rows` rows of n elements, row_bytes(t, n) apart. Callers thread over disjoint row ranges.
void matmul(Type t, const void* w, int64_t rows, int64_t n, const float* x, int64_t x_stride, int64_t n_cols, float* y,
            int64_t y_stride, int64_t row_begin, int64_t row_end);

// Row w_row of n elements of type t as float32, decoded as the dot products above decode it
// (vectorised; for the transposed products, which add whole weight rows into their outputs).
void decode_row(Type t, const void* w_row, float* out, int64_t n);

}  // namespace ggl
