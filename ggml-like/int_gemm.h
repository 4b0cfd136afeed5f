// The integer GEMMs (gemm_int16.h, gemm_int8.h) behind one interface, for callers that choose
// between them per product.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ggml-like/gemm_int16.h"
#include "ggml-like/gemm_int8.h"

namespace ggl {

struct IntGemm {
  const char* name;
  int levels;  // activation quantization levels each side of zero
  bool (*supports)(Type, int64_t);
  size_t (*column_bytes)(int64_t);
  void (*quantize_column)(const float*, int64_t, void*);
  size_t (*panel_bytes)(int64_t);
  void (*pack_panel)(Type, const uint8_t*, size_t, int64_t, int64_t, void*);
  void (*multiply_panel)(Type, const void*, int64_t, int64_t, const void* const*, float* const*, int64_t);
};

inline constexpr int64_t kIntGemmPanelRows = int16_gemm::kPanelRows;
static_assert(int8_gemm::kPanelRows == kIntGemmPanelRows);

inline constexpr IntGemm kInt16Gemm{"int16",
                                    32767,
                                    int16_gemm::supports,
                                    int16_gemm::column_bytes,
                                    int16_gemm::quantize_column,
                                    int16_gemm::panel_bytes,
                                    int16_gemm::pack_panel,
                                    int16_gemm::multiply_panel};
inline constexpr IntGemm kInt8Gemm{"int8",
                                   127,
                                   int8_gemm::supports,
                                   int8_gemm::column_bytes,
                                   int8_gemm::quantize_column,
                                   int8_gemm::panel_bytes,
                                   int8_gemm::pack_panel,
                                   int8_gemm::multiply_panel};

}  // namespace ggl
