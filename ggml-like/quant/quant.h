// Row quantization and dequantization for every type latte stores, byte-exact with ggml's
// quantizers; the block layouts live in legacy.h, kquants.h, iq1.h, iq2.h, iq3.h and iq4.h.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ggml-like/core/types.h"
#include "ggml-like/quant/iq1.h"
#include "ggml-like/quant/iq2.h"
#include "ggml-like/quant/iq3.h"
#include "ggml-like/quant/iq4.h"
#include "ggml-like/quant/kquants.h"
#include "ggml-like/quant/legacy.h"

namespace ggl {

// Converts n floats into a row of type t: any weight type (is_weight_type) or Q8_K. n must be a
// multiple of the type's block size. Without importance, the bytes are those of ggml's
// ggml_quantize_chunk without an importance matrix.
// importance: nullptr, or n non-negative per-column weights (an imatrix's mean squared activation
// of each input column). The types for which quantizer_uses_importance is true then run ggml's
// error-weighted quantizers (ggml's quant_weights path); the others ignore it. With importance, n
// must be exactly one tensor row: several of those quantizers weigh by the row's mean square.
void quantize_row(Type t, const float* src, void* dst, int64_t n, const float* importance = nullptr);

// Converts a row of n elements of type t (a weight type or Q8_K) back to floats.
void dequantize_row(Type t, const void* src, float* dst, int64_t n);

// True for the types a model's tensors can have and latte computes with: F32, F16, BF16, Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, IQ4_NL, IQ4_XS, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S. Q8_K is not one: it is the activation format
// of ggml's K-quant dot products, which no model file stores (quantize_row/dequantize_row still
// handle it).
bool is_weight_type(Type t);

// True where quantize_row's importance changes the result: Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K,
// IQ4_NL, IQ4_XS and the IQ1 / IQ2 / IQ3 types (ggml's quantizers that take quant_weights). False for the
// float types, Q8_0, Q8_K.
bool quantizer_uses_importance(Type t);

// True where quantize_row refuses to run without importance, as ggml's quantizer does
// (ggml_quantize_requires_imatrix): IQ2_XXS, IQ2_XS, IQ1_S. (IQ2_S and IQ1_M have an unweighted form.)
bool quantizer_requires_importance(Type t);

}  // namespace ggl
