// Normally distributed test values, reproducible from a seed.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "ggml-like/core/fp16.h"
#include "ggml-like/core/types.h"
#include "ggml-like/quant/iq1.h"
#include "ggml-like/quant/quant.h"

namespace latte::testing {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// `cols` activation columns of n values drawn from `normal`, shaped as real hidden states are: an
// outlier of 300 per column (at (c * outlier_step) % n), a block of zeros (values 32..63) and a
// tiny block (64..95, scaled by 1e-6) where n allows.
inline std::vector<float> hidden_state_like(std::mt19937& rng, std::normal_distribution<float>& normal, int64_t cols,
                                            int64_t n, int64_t outlier_step) {
  std::vector<float> x(cols * n);
  for (float& v : x) v = normal(rng);
  for (int64_t c = 0; c < cols; ++c) {
    x[c * n + (c * outlier_step) % n] = 300.0f;
    if (n >= 96) {
      std::fill(x.begin() + c * n + 32, x.begin() + c * n + 64, 0.0f);
      for (int64_t i = 64; i < 96; ++i) x[c * n + i] *= 1e-6f;
    }
  }
  return x;
}

// Every type a model's weights can have (ggl::is_weight_type), in type id order: the types
// quantized_rows makes.
inline std::vector<ggl::Type> weight_types() {
  std::vector<ggl::Type> out;
  for (uint32_t id = 0; id < 64; ++id) {
    const auto t = static_cast<ggl::Type>(id);
    if (ggl::type_traits(id) && ggl::is_weight_type(t)) out.push_back(t);
  }
  return out;
}

// `rows` weight rows of n values quantized to type t (bytes, stride apart) and dequantized back
// (values): rows of different magnitudes (0.02 to 0.1 times `normal`), every third one (or, with
// offset_all, every one) offset by 0.05 so that mins and zero points take part.
struct QuantizedRows {
  size_t stride;
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};
inline QuantizedRows quantized_rows(ggl::Type t, int64_t rows, int64_t n, std::mt19937& rng,
                                    std::normal_distribution<float>& normal, bool offset_all = false) {
  QuantizedRows out{ggl::row_bytes(t, n), {}, std::vector<float>(rows * n)};
  out.bytes.resize(out.stride * rows);
  std::vector<float> src(n);
  // The types whose quantizer needs an importance matrix get a uniform one.
  const std::vector<float> importance(static_cast<size_t>(n), 1.0f);
  const float* weights = ggl::quantizer_requires_importance(t) ? importance.data() : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    const float scale = 0.02f * static_cast<float>(1 + r % 5), offset = (offset_all || r % 3 == 1) ? 0.05f : 0.0f;
    for (float& v : src) v = normal(rng) * scale + offset;
    ggl::quantize_row(t, src.data(), out.bytes.data() + r * out.stride, n, weights);
    ggl::dequantize_row(t, out.bytes.data() + r * out.stride, out.values.data() + r * n, n);
  }
  return out;
}

// i-quant rows as random blocks: every byte pattern is a valid block (grid indices, signs, scales
// and shifts all uniform, each grid point drawn about equally often), with the super-block scale
// set to one of five sane magnitudes. (The reference quantizer's searches would be most of these
// tests' time, under qemu far more, and reach fewer grid points.) IQ1_M keeps its fp16 scale in
// the top nibbles of its four scale words.
inline QuantizedRows random_iquant_rows(ggl::Type t, int64_t rows, int64_t n, std::mt19937& rng) {
  QuantizedRows out{ggl::row_bytes(t, n), {}, std::vector<float>(rows * n)};
  out.bytes.resize(out.stride * rows);
  std::uniform_int_distribution<int> byte(0, 255);
  const size_t block_bytes = ggl::traits(t).block_bytes;
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = out.bytes.data() + r * out.stride;
    for (size_t i = 0; i < out.stride; ++i) row[i] = static_cast<uint8_t>(byte(rng));
    const uint16_t d = ggl::f32_to_fp16(0.002f * static_cast<float>(1 + r % 5));
    for (size_t b = 0; b < out.stride / block_bytes; ++b) {
      uint8_t* block = row + b * block_bytes;
      if (t == ggl::Type::IQ1_M) {
        uint8_t* scales = block + offsetof(ggl::BlockIQ1_M, scales);
        for (int i = 0; i < 4; ++i)
          scales[2 * i + 1] = static_cast<uint8_t>((scales[2 * i + 1] & 0x0F) | ((d >> (4 * i)) & 0xF) << 4);
      } else {
        std::memcpy(block, &d, sizeof d);
      }
    }
    ggl::dequantize_row(t, row, out.values.data() + r * n, n);
  }
  return out;
}

}  // namespace latte::testing
