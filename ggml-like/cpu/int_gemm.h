// Integer GEMMs for matrix multiplications with group-quantized weights. Activations are
// quantized per 32-element block to integers with a float scale, weights are unpacked to
// integers, and integer dot steps multiply them (AVX-512 VNNI below; AVX2 has the same paths with
// VPMADDWD and VPMADDUBSW, cpu/arch/x86/avx2/gemm_steps.h):
//   kInt16Gemm: 16-bit activations (14 bits against the block's largest value: finer than fp16)
//               times Q4_0 / Q4_1 / Q8_0 weights and the K-quant / IQ4 / Q5 types (each 32
//               values unpacked to d * w + m, cpu/arch/kquant_unpack.h) as 16-bit integers,
//               VPDPWSSD (32 multiply-adds per instruction: twice float32 FMA), at close to float32
//               accuracy (gemm_int16.cpp);
//   kInt8Gemm:  8-bit activations (as llama.cpp's Q8 activations) times Q4_0 / Q4_1 weights kept
//               as 4-bit values in bytes, VPDPBUSD (64 per instruction); about as noisy as the
//               reference engine's own quantized matmuls, so the engine uses it only where that
//               measured harmless (docs/cpu-kernels.md, "Which precision each product uses")
//               (gemm_int8.cpp).
// Many columns (prefill) go through panels: weights are taken 32 rows at a time and transposed so
// that the lanes of a vector hold rows (16 on AVX-512, 8 on AVX2): a dot step adds 2 or 4
// products into every row sum, the block scales apply to whole vectors once per block, and nothing
// is summed horizontally. A panel is unpacked once and reused by every activation column
// (cpu/simd/gemm_panel.h).
// A few columns (decode) go straight through the weight rows (cpu/simd/gemm_rows.h).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "ggml-like/core/types.h"

namespace ggl {

// Rows per panel.
inline constexpr int64_t kIntGemmPanelRows = 32;

// Sizes of the parts of a quantized column, rounded up to whole 64-byte lines (column_bytes is a
// multiple of 64, and each part starts on a line).
inline constexpr size_t round64(size_t b) { return (b + 63) / 64 * 64; }

struct IntGemm {
  const char* name;
  int levels;  // activation quantization levels each side of zero
  // Whether this build has the path, integer GEMMs are enabled, and it takes weights of type t
  // with rows of n elements. Where it does not, callers use the float32 matmul (dot.h); the other
  // members are then not to be called.
  bool (*supports)(Type t, int64_t n);
  // One activation column of n elements, quantized (column_bytes is a multiple of 64).
  size_t (*column_bytes)(int64_t n);
  void (*quantize_column)(const float* x, int64_t n, void* column);
  // A panel of `rows` (<= kIntGemmPanelRows) weight rows of type t, row_stride bytes apart, unpacked.
  // A GEMM without panels (gemm_kquant.cpp) has these three null: every column count then goes
  // through multiply_rows.
  size_t (*panel_bytes)(int64_t n);
  void (*pack_panel)(Type t, const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, void* panel);
  // y[c][r] = dot(row r of the panel, column c) for r < rows, c < n_cols.
  void (*multiply_panel)(Type t, const void* panel, int64_t rows, int64_t n, const void* const* columns,
                         float* const* y, int64_t n_cols);
  // For a few columns (a decode step), where unpacking panels would cost more than it saves: the
  // same products read straight from `rows` weight rows, y[c][r] for r < rows, c < n_cols
  // (gemm_rows.h).
  void (*multiply_rows)(Type t, const uint8_t* w, size_t row_stride, int64_t rows, int64_t n,
                        const void* const* columns, float* const* y, int64_t n_cols);
};

// What a kernel set without the path has for it: it supports nothing, so callers take the
// float32 path and never call the other members.
constexpr IntGemm unavailable_int_gemm(const char* name, int levels) {
  return {name, levels, [](Type, int64_t) { return false; }, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
}

// The 16-bit GEMM of the kernel set in use (kernel_set.h; its table also holds the 8-bit one).
const IntGemm& int16_gemm();

// Process-wide switch (on by default): off, every product takes the float32 path, e.g. to check
// that two mathematically equal forms of a computation agree to float32 rounding.
inline std::atomic<bool> g_int_gemm_enabled{true};
inline void set_int_gemm_enabled(bool on) { g_int_gemm_enabled.store(on, std::memory_order_relaxed); }
inline bool int_gemm_enabled() { return g_int_gemm_enabled.load(std::memory_order_relaxed); }

}  // namespace ggl
