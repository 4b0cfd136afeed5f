// Reference quantizers. They follow ggml's round-to-nearest reference quantizers step by step,
// in float32, because converted model files must come out byte-identical to ggml's.
#include "ggml-like/quant/quant.h"

#include <cfloat>
#include <cmath>
#include <cstring>

#include "ggml-like/core/error.h"
#include "ggml-like/core/fp16.h"

// ggml's reference rounds every product before the following add; a fused multiply-add
// (which -march=native lets the compiler form across statements) flips rare rounding edges.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace ggl {
namespace {

// (int)v truncated toward zero and clamped to [lo, hi]. ggml converts with a plain cast, which is
// the same for every in-range value; the clamp only keeps NaN/inf inputs from being undefined.
inline int trunc_clamped(float v, int lo, int hi) {
  if (!(v >= static_cast<float>(lo))) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += kQuantBlock) {
    float amax = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    for (int j = 0; j < kQuantBlock; ++j) {
      const float scaled = x[j] * id;
      // roundf: halfway cases away from zero.
      const float r = std::round(scaled);
      y[b].qs[j] = static_cast<int8_t>(r >= 127.0f ? 127 : r <= -128.0f ? -128 : static_cast<int>(r));
    }
  }
}

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += kQuantBlock) {
    // The element of largest magnitude, with its sign: it maps to -8, the asymmetric end.
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    constexpr int kHalf = kQuantBlock / 2;
    for (int j = 0; j < kHalf; ++j) {
      const int lo = trunc_clamped(x[j] * id + 8.5f, 0, 15);
      const int hi = trunc_clamped(x[j + kHalf] * id + 8.5f, 0, 15);
      y[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += kQuantBlock) {
    float min = FLT_MAX;
    float max = -FLT_MAX;
    for (int j = 0; j < kQuantBlock; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    y[b].m = f32_to_fp16(min);
    constexpr int kHalf = kQuantBlock / 2;
    for (int j = 0; j < kHalf; ++j) {
      const int lo = trunc_clamped((x[j] - min) * id + 0.5f, 0, 15);
      const int hi = trunc_clamped((x[j + kHalf] - min) * id + 0.5f, 0, 15);
      y[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, y += kQuantBlock) {
    const float d = fp16_to_f32(x[b].d);
    for (int j = 0; j < kQuantBlock; ++j) y[j] = d * static_cast<float>(x[b].qs[j]);
  }
}

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t n_blocks) {
  constexpr int kHalf = kQuantBlock / 2;
  for (int64_t b = 0; b < n_blocks; ++b, y += kQuantBlock) {
    const float d = fp16_to_f32(x[b].d);
    for (int j = 0; j < kHalf; ++j) {
      y[j] = d * static_cast<float>((x[b].qs[j] & 0x0f) - 8);
      y[j + kHalf] = d * static_cast<float>((x[b].qs[j] >> 4) - 8);
    }
  }
}

void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t n_blocks) {
  constexpr int kHalf = kQuantBlock / 2;
  for (int64_t b = 0; b < n_blocks; ++b, y += kQuantBlock) {
    const float d = fp16_to_f32(x[b].d);
    const float m = fp16_to_f32(x[b].m);
    for (int j = 0; j < kHalf; ++j) {
      y[j] = d * static_cast<float>(x[b].qs[j] & 0x0f) + m;
      y[j + kHalf] = d * static_cast<float>(x[b].qs[j] >> 4) + m;
    }
  }
}

// Throws unless (t, n) is a row quantize_row/dequantize_row can handle.
void check_row(const char* what, Type t, int64_t n) {
  if (!is_weight_type(t)) fail("{}: unsupported type {}", what, type_name(t));
  const int block = traits(t).block_size;
  if (n < 0 || n % block != 0)
    fail("{}: row of {} elements is not a multiple of the {} block size {}", what, n, type_name(t), block);
}

}  // namespace

bool is_weight_type(Type t) {
  switch (t) {
    case Type::F32:
    case Type::F16:
    case Type::BF16:
    case Type::Q8_0:
    case Type::Q4_0:
    case Type::Q4_1:
      return true;
    default:
      return false;
  }
}

void quantize_row(Type t, const float* src, void* dst, int64_t n) {
  check_row("quantize_row", t, n);
  switch (t) {
    case Type::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case Type::F16: f32_to_fp16_row(src, static_cast<uint16_t*>(dst), n); return;
    case Type::BF16: f32_to_bf16_row(src, static_cast<uint16_t*>(dst), n); return;
    case Type::Q8_0: quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), n / kQuantBlock); return;
    case Type::Q4_0: quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), n / kQuantBlock); return;
    case Type::Q4_1: quantize_q4_1(src, static_cast<BlockQ4_1*>(dst), n / kQuantBlock); return;
    default: return;  // rejected by check_row
  }
}

void dequantize_row(Type t, const void* src, float* dst, int64_t n) {
  check_row("dequantize_row", t, n);
  switch (t) {
    case Type::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case Type::F16: fp16_to_f32_row(static_cast<const uint16_t*>(src), dst, n); return;
    case Type::BF16: bf16_to_f32_row(static_cast<const uint16_t*>(src), dst, n); return;
    case Type::Q8_0: dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, n / kQuantBlock); return;
    case Type::Q4_0: dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, n / kQuantBlock); return;
    case Type::Q4_1: dequantize_q4_1(static_cast<const BlockQ4_1*>(src), dst, n / kQuantBlock); return;
    default: return;
  }
}

}  // namespace ggl
