// The row-by-row encoder that turns float32 rows into a storage type, shared by `latte convert`,
// `latte quantize` and `latte synth` (which type each tensor gets is quant_recipe.h's job).
#pragma once
#include <cstdint>
#include <functional>

#include "ggml-like/core/types.h"

namespace latte::convert {

// Produces rows [first, first + count) of a tensor, each ne0 floats, into dst.
using RowFill = std::function<void(int64_t first, int64_t count, float* dst)>;

// Encodes one row of n floats as type t; importance is nullptr or n per-column weights.
// Default: the reference quantizer (ggml-like/quant/quant.h). Tests pass their own to see what
// reaches the quantizer.
using RowQuantizer = std::function<void(ggl::Type t, const float* src, void* dst, int64_t n, const float* importance)>;

// Per-column importance of a tensor (from an importance matrix): row r uses
// values + (r / rows_per_matrix) * ne0, i.e. one vector per matrix (per expert of a 3-D tensor).
struct RowImportance {
  const float* values = nullptr;
  int64_t rows_per_matrix = 1;
};

// Encodes `rows` rows of ne0 floats, produced by `fill` a chunk at a time, as type t into dst
// (exactly rows * row_bytes(t, ne0) bytes). Memory used: one chunk of a few MiB of floats.
void encode_rows(ggl::Type t, int64_t ne0, int64_t rows, const RowFill& fill, uint8_t* dst,
                 const RowImportance& importance = {}, const RowQuantizer& quantizer = {});

}  // namespace latte::convert
