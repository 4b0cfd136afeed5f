// Dispatch of the row (de)quantizers by type, and the checks every caller gets.
#include "ggml-like/quant/quant.h"

#include <cmath>
#include <cstring>

#include "ggml-like/core/error.h"
#include "ggml-like/core/fp16.h"
#include "ggml-like/core/weight_type_switch.h"
#include "ggml-like/quant/iq3.h"

namespace ggl {
namespace {

bool is_row_type(Type t) { return is_weight_type(t) || t == Type::Q8_K; }

// Throws unless (t, n) is a row quantize_row/dequantize_row can handle.
void check_row(const char* what, Type t, int64_t n) {
  if (!is_row_type(t)) fail("{}: unsupported type {}", what, type_name(t));
  const int block = traits(t).block_size;
  if (n < 0 || n % block != 0)
    fail("{}: row of {} elements is not a multiple of the {} block size {}", what, n, type_name(t), block);
}

void check_importance(Type t, const float* importance, int64_t n) {
  if (!importance && quantizer_requires_importance(t))
    fail("quantize_row: {} needs an importance matrix (ggml's quantizer refuses to run without one)", type_name(t));
  if (!importance || !quantizer_uses_importance(t)) return;
  for (int64_t j = 0; j < n; ++j)
    if (!(importance[j] >= 0.0f) || std::isinf(importance[j]))
      fail("quantize_row: importance of column {} is {}, expected a finite non-negative weight", j, importance[j]);
}

template <class Block>
Block* as(void* p) {
  return static_cast<Block*>(p);
}
template <class Block>
const Block* as(const void* p) {
  return static_cast<const Block*>(p);
}

}  // namespace

// The list of weight types is written once, in the shared switch (core/weight_type_switch.h).
bool is_weight_type(Type t) {
  return with_weight_type(t, [](auto) {});
}

bool quantizer_requires_importance(Type t) {
  return t == Type::IQ2_XXS || t == Type::IQ2_XS || t == Type::IQ1_S;  // ggml_quantize_requires_imatrix
}

bool quantizer_uses_importance(Type t) {
  // Every quantized weight type but Q8_0, whose ggml quantizer has no weighted form.
  return is_weight_type(t) && traits(t).quantized && t != Type::Q8_0;
}

void quantize_row(Type t, const float* src, void* dst, int64_t n, const float* importance) {
  check_row("quantize_row", t, n);
  check_importance(t, importance, n);
  using namespace quant;
  switch (t) {
    case Type::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case Type::F16: f32_to_fp16_row(src, static_cast<uint16_t*>(dst), n); return;
    case Type::BF16: f32_to_bf16_row(src, static_cast<uint16_t*>(dst), n); return;
    case Type::Q8_0: quantize_q8_0(src, as<BlockQ8_0>(dst), n); return;
    case Type::Q4_0: quantize_q4_0(src, as<BlockQ4_0>(dst), n, importance); return;
    case Type::Q4_1: quantize_q4_1(src, as<BlockQ4_1>(dst), n, importance); return;
    case Type::Q5_0: quantize_q5_0(src, as<BlockQ5_0>(dst), n, importance); return;
    case Type::Q5_1: quantize_q5_1(src, as<BlockQ5_1>(dst), n, importance); return;
    case Type::Q2_K: quantize_q2_k(src, as<BlockQ2_K>(dst), n, importance); return;
    case Type::Q3_K: quantize_q3_k(src, as<BlockQ3_K>(dst), n, importance); return;
    case Type::Q4_K: quantize_q4_k(src, as<BlockQ4_K>(dst), n, importance); return;
    case Type::Q5_K: quantize_q5_k(src, as<BlockQ5_K>(dst), n, importance); return;
    case Type::Q6_K: quantize_q6_k(src, as<BlockQ6_K>(dst), n, importance); return;
    case Type::Q8_K: quantize_q8_k(src, as<BlockQ8_K>(dst), n); return;
    case Type::IQ4_NL: quantize_iq4_nl(src, as<BlockIQ4_NL>(dst), n, importance); return;
    case Type::IQ4_XS: quantize_iq4_xs(src, as<BlockIQ4_XS>(dst), n, importance); return;
    case Type::IQ2_XXS: quantize_iq2_xxs(src, as<BlockIQ2_XXS>(dst), n, importance); return;
    case Type::IQ2_XS: quantize_iq2_xs(src, as<BlockIQ2_XS>(dst), n, importance); return;
    case Type::IQ2_S: quantize_iq2_s(src, as<BlockIQ2_S>(dst), n, importance); return;
    case Type::IQ1_S: quantize_iq1_s(src, as<BlockIQ1_S>(dst), n, importance); return;
    case Type::IQ1_M: quantize_iq1_m(src, as<BlockIQ1_M>(dst), n, importance); return;
    case Type::IQ3_XXS: quantize_iq3_xxs(src, as<BlockIQ3_XXS>(dst), n, importance); return;
    case Type::IQ3_S: quantize_iq3_s(src, as<BlockIQ3_S>(dst), n, importance); return;
    default: return;  // rejected by check_row
  }
}

void dequantize_row(Type t, const void* src, float* dst, int64_t n) {
  check_row("dequantize_row", t, n);
  using namespace quant;
  switch (t) {
    case Type::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case Type::F16: fp16_to_f32_row(static_cast<const uint16_t*>(src), dst, n); return;
    case Type::BF16: bf16_to_f32_row(static_cast<const uint16_t*>(src), dst, n); return;
    case Type::Q8_0: dequantize_q8_0(as<BlockQ8_0>(src), dst, n); return;
    case Type::Q4_0: dequantize_q4_0(as<BlockQ4_0>(src), dst, n); return;
    case Type::Q4_1: dequantize_q4_1(as<BlockQ4_1>(src), dst, n); return;
    case Type::Q5_0: dequantize_q5_0(as<BlockQ5_0>(src), dst, n); return;
    case Type::Q5_1: dequantize_q5_1(as<BlockQ5_1>(src), dst, n); return;
    case Type::Q2_K: dequantize_q2_k(as<BlockQ2_K>(src), dst, n); return;
    case Type::Q3_K: dequantize_q3_k(as<BlockQ3_K>(src), dst, n); return;
    case Type::Q4_K: dequantize_q4_k(as<BlockQ4_K>(src), dst, n); return;
    case Type::Q5_K: dequantize_q5_k(as<BlockQ5_K>(src), dst, n); return;
    case Type::Q6_K: dequantize_q6_k(as<BlockQ6_K>(src), dst, n); return;
    case Type::Q8_K: dequantize_q8_k(as<BlockQ8_K>(src), dst, n); return;
    case Type::IQ4_NL: dequantize_iq4_nl(as<BlockIQ4_NL>(src), dst, n); return;
    case Type::IQ4_XS: dequantize_iq4_xs(as<BlockIQ4_XS>(src), dst, n); return;
    case Type::IQ2_XXS: dequantize_iq2_xxs(as<BlockIQ2_XXS>(src), dst, n); return;
    case Type::IQ2_XS: dequantize_iq2_xs(as<BlockIQ2_XS>(src), dst, n); return;
    case Type::IQ2_S: dequantize_iq2_s(as<BlockIQ2_S>(src), dst, n); return;
    case Type::IQ1_S: dequantize_iq1_s(as<BlockIQ1_S>(src), dst, n); return;
    case Type::IQ1_M: dequantize_iq1_m(as<BlockIQ1_M>(src), dst, n); return;
    case Type::IQ3_XXS: dequantize_iq3_xxs(as<BlockIQ3_XXS>(src), dst, n); return;
    case Type::IQ3_S: dequantize_iq3_s(as<BlockIQ3_S>(src), dst, n); return;
    default: return;
  }
}

}  // namespace ggl
