// The 8-bit sibling of gemm_int16.h, for 4-bit weights (Q4_0, Q4_1): activations quantized per
// 32-element block to int8 with a float scale (as llama.cpp's Q8 activations), weights kept as
// unsigned 4-bit values in bytes, and VPDPBUSD multiplying 64 byte pairs per instruction: twice
// the rate of the 16-bit path. Panels have the same shape (32 rows, lanes are rows), each lane
// holding 4 consecutive weights of its row.
//
// 8-bit activations add about as much noise as the reference engine's own quantized matmuls, so
// the engine uses this only where it measured harmless: the routed experts of a MoE prefill
// (README, "CPU speed").
#pragma once
#include <cstddef>
#include <cstdint>

#include "ggml-like/gemm_int16.h"
#include "ggml-like/types.h"

namespace ggl::int8_gemm {

inline constexpr int64_t kPanelRows = int16_gemm::kPanelRows;

// Whether this build has the 8-bit path, integer GEMMs are enabled (int16_gemm::set_enabled), and
// it takes weights of type t (Q4_0, Q4_1) with rows of n elements.
bool supports(Type t, int64_t n);

size_t column_bytes(int64_t n);
void quantize_column(const float* x, int64_t n, void* column);
size_t panel_bytes(int64_t n);
void pack_panel(Type t, const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, void* panel);
void multiply_panel(Type t, const void* panel, int64_t rows, int64_t n, const void* const* columns, float* const* y,
                    int64_t n_cols);

}  // namespace ggl::int8_gemm
