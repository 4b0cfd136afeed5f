// Dot products of weight rows (any weight type) with float32 activations: the inner loop of
// every matrix multiplication. Scalar/auto-vectorised now; SIMD variants plug in behind these.
#pragma once
#include <cstdint>

#include "ggml-like/types.h"

namespace ggl {

// sum_i w[i] * x[i] over a row of n elements of type t (n a multiple of the block size).
float dot_row(Type t, const void* w_row, const float* x, int64_t n);

// y[r] = dot(row r of w, x) for r in [0, rows); rows are row_bytes(t, n) apart. Single-threaded:
// callers split rows across threads.
void matvec(Type t, const void* w, int64_t rows, int64_t n, const float* x, float* y);

}  // namespace ggl
