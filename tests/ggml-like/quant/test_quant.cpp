// Quantization: byte-exact agreement with ggml's reference quantizer on the shared fixtures,
// hand-checked blocks for the rounding rules, and round-trip error bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/core/fp16.h"
#include "ggml-like/gguf/gguf.h"
#include "ggml-like/quant/quant.h"
#include "tests/support/quant_fixture_util.h"
#include "tests/support/test_support.h"

namespace test_quant {

using ggl::Type;

std::vector<uint8_t> quantize(Type t, const std::vector<float>& x) {
  std::vector<uint8_t> out(ggl::row_bytes(t, static_cast<int64_t>(x.size())));
  ggl::quantize_row(t, x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

std::vector<float> dequantize(Type t, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  ggl::dequantize_row(t, q.data(), out.data(), n);
  return out;
}

// Known answer: every tensor of `quantized_name` must equal the F32 fixture's tensor of the same
// name, quantized row by row by us (or copied, for the tensors the reference kept in F32).
void expect_fixture_reproduced(const std::string& quantized_name, Type target) {
  const auto dir = latte::testing::shared_dir() / "fixtures";
  const ggl::GgufFile f32((dir / "ds2-v2-tiny-f32.gguf").string());
  const ggl::GgufFile quant((dir / quantized_name).string());
  ASSERT_EQ(f32.tensors().size(), quant.tensors().size());

  int quantized_tensors = 0;
  for (const ggl::TensorInfo& q : quant.tensors()) {
    SCOPED_TRACE(q.name);
    const ggl::TensorInfo* src = f32.find_tensor(q.name);
    ASSERT_NE(src, nullptr) << "missing in the F32 fixture";
    ASSERT_EQ(src->type, Type::F32);
    ASSERT_EQ(src->n_dims, q.n_dims);
    for (int d = 0; d < ggl::kMaxDims; ++d) ASSERT_EQ(src->ne[d], q.ne[d]);

    // The reference's policy: 1-D tensors and the router (ffn_gate_inp) stay F32.
    const bool stays_f32 = q.n_dims == 1 || q.name.find("ffn_gate_inp") != std::string::npos;
    ASSERT_EQ(q.type, stays_f32 ? Type::F32 : target);
    if (!stays_f32) ++quantized_tensors;

    const latte::testing::BlockComparison c = latte::testing::quantize_and_compare(*src, q);
    EXPECT_EQ(c.differing, 0u) << "blocks differ; first is block " << c.first << " of " << c.blocks;
  }
  EXPECT_GT(quantized_tensors, 10);  // the comparison above really exercised the quantizer
}

TEST(QuantFixture, Q8_0ReproducesTheReferenceFileByteForByte) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-f32.gguf");
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q8_0.gguf");
  expect_fixture_reproduced("ds2-v2-tiny-q8_0.gguf", Type::Q8_0);
}

TEST(QuantFixture, Q4_0ReproducesTheReferenceFileByteForByte) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-f32.gguf");
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q4_0.gguf");
  expect_fixture_reproduced("ds2-v2-tiny-q4_0.gguf", Type::Q4_0);
}

// Hand-made blocks whose scale is exactly 1, so every quant is predictable by hand.

TEST(Quant, Q8_0BlockLayoutAndRoundingHalfAwayFromZero) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // amax 127 -> d = 1
  x[1] = 2.5f;    // roundf: away from zero -> 3 (round-to-even would give 2)
  x[2] = -2.5f;   // -> -3
  x[3] = -127.0f;
  x[4] = 0.49f;
  x[5] = 126.5f;  // -> 127
  const auto q = quantize(Type::Q8_0, x);
  ASSERT_EQ(q.size(), 34u);
  ggl::BlockQ8_0 b;
  std::memcpy(&b, q.data(), sizeof b);
  EXPECT_EQ(b.d, 0x3c00);  // fp16 1.0
  const int8_t expected[6] = {127, 3, -3, -127, 0, 127};
  for (int j = 0; j < 6; ++j) EXPECT_EQ(b.qs[j], expected[j]) << "element " << j;
  for (int j = 6; j < 32; ++j) EXPECT_EQ(b.qs[j], 0) << "element " << j;
}

TEST(Quant, Q4_0NibbleOrderSignedMaxAndHalfUpRounding) {
  // Elements 0..15 are -8..7, elements 16..31 are 7..-8; the first element of largest magnitude
  // (-8, negative) gives d = -8 / -8 = 1, so q = x + 8.
  std::vector<float> x(32);
  for (int j = 0; j < 16; ++j) {
    x[j] = static_cast<float>(j - 8);
    x[j + 16] = static_cast<float>(7 - j);
  }
  auto q = quantize(Type::Q4_0, x);
  ASSERT_EQ(q.size(), 18u);
  ggl::BlockQ4_0 b;
  std::memcpy(&b, q.data(), sizeof b);
  EXPECT_EQ(b.d, 0x3c00);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], j | ((15 - j) << 4)) << "byte " << j;

  // Halfway values round up: 0.5 -> q 9 (value 1), -0.5 -> q 8 (value 0).
  x[1] = 0.5f;
  x[2] = -0.5f;
  q = quantize(Type::Q4_0, x);
  std::memcpy(&b, q.data(), sizeof b);
  EXPECT_EQ(b.qs[1] & 0x0f, 9);
  EXPECT_EQ(b.qs[2] & 0x0f, 8);

  // A positive maximum gives a negative scale: +8 maps to q = 0, and -8 would be q = 16, clamped to 15.
  std::vector<float> y(32, 0.0f);
  y[3] = 8.0f;
  y[4] = -8.0f;
  q = quantize(Type::Q4_0, y);
  std::memcpy(&b, q.data(), sizeof b);
  EXPECT_EQ(b.d, 0xbc00);  // fp16 -1.0
  EXPECT_EQ(b.qs[3] & 0x0f, 0);
  EXPECT_EQ(b.qs[4] & 0x0f, 15);
  EXPECT_EQ(b.qs[5] & 0x0f, 8);
  const auto back = dequantize(Type::Q4_0, q, 32);
  EXPECT_EQ(back[3], 8.0f);
  EXPECT_EQ(back[4], -7.0f);
  EXPECT_EQ(back[5], 0.0f);
}

TEST(Quant, Q4_1MinAndScaleWithHalfUpRounding) {
  // Values 3..18 and back: min 3, max 18 -> d = 1, m = 3, q = x - 3.
  std::vector<float> x(32);
  for (int j = 0; j < 16; ++j) {
    x[j] = static_cast<float>(j + 3);
    x[j + 16] = static_cast<float>(18 - j);
  }
  x[5] = 5.5f;  // q = 2.5 + 0.5 -> 3
  const auto q = quantize(Type::Q4_1, x);
  ASSERT_EQ(q.size(), 20u);
  ggl::BlockQ4_1 b;
  std::memcpy(&b, q.data(), sizeof b);
  EXPECT_EQ(b.d, 0x3c00);
  EXPECT_EQ(b.m, 0x4200);  // fp16 3.0
  for (int j = 0; j < 16; ++j) {
    const int lo = j == 5 ? 3 : j;
    EXPECT_EQ(b.qs[j], lo | ((15 - j) << 4)) << "byte " << j;
  }
  const auto back = dequantize(Type::Q4_1, q, 32);
  EXPECT_EQ(back[0], 3.0f);
  EXPECT_EQ(back[5], 6.0f);
  EXPECT_EQ(back[16], 18.0f);
}

TEST(Quant, AllZeroBlocksDecodeToZero) {
  const std::vector<float> zeros(64, 0.0f);
  for (Type t : {Type::Q8_0, Type::Q4_0, Type::Q4_1}) {
    const auto back = dequantize(t, quantize(t, zeros), 64);
    for (float v : back) EXPECT_EQ(v, 0.0f) << ggl::type_name(t);
  }
}

// Round to nearest: every element comes back within half a quantization step (plus the error of
// storing the scale and min as fp16). Q4_0 has one exception: its range is [-8, 7] steps with the
// largest magnitude at -8, so elements of the opposite sign beyond 7.5 steps clamp to 7 steps.
TEST(Quant, RoundTripErrorIsWithinHalfAStep) {
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> x(32 * 64);
  for (float& v : x) v = dist(rng);
  for (Type t : {Type::Q8_0, Type::Q4_0, Type::Q4_1}) {
    const auto back = dequantize(t, quantize(t, x), static_cast<int64_t>(x.size()));
    for (size_t b = 0; b < x.size() / 32; ++b) {
      float lo = x[b * 32], hi = x[b * 32], amax = 0, signed_max = 0;
      for (int j = 0; j < 32; ++j) {
        lo = std::min(lo, x[b * 32 + j]);
        hi = std::max(hi, x[b * 32 + j]);
        if (std::fabs(x[b * 32 + j]) > amax) {
          amax = std::fabs(x[b * 32 + j]);
          signed_max = x[b * 32 + j];
        }
      }
      const float step = t == Type::Q8_0 ? amax / 127 : t == Type::Q4_0 ? amax / 8 : (hi - lo) / 15;
      // fp16 scale: relative error 2^-11 on each of up to 16 steps, plus the fp16 min.
      const float tol = 0.5f * step + 16 * step * 0x1p-11f + std::fabs(lo) * 0x1p-11f;
      for (int j = 0; j < 32; ++j) {
        const size_t i = b * 32 + j;
        const bool clamped = t == Type::Q4_0 && x[i] * signed_max < 0 && std::fabs(x[i]) > 7.5f * step;
        EXPECT_NEAR(back[i], x[i], clamped ? tol + 0.5f * step : tol) << ggl::type_name(t) << " element " << i;
      }
    }
  }
}

TEST(Quant, PlainTypesConvertElementwise) {
  const std::vector<float> x = {1.0f, -2.5f, 65504.0f, 1e-8f, 3.14159f, -0.0f};
  const auto f32 = quantize(Type::F32, x);
  EXPECT_EQ(std::memcmp(f32.data(), x.data(), f32.size()), 0);
  for (Type t : {Type::F16, Type::BF16}) {
    const auto q = quantize(t, x);
    const auto back = dequantize(t, q, static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, q.data() + 2 * i, 2);
      EXPECT_EQ(h, t == Type::F16 ? ggl::f32_to_fp16(x[i]) : ggl::f32_to_bf16(x[i]));
      EXPECT_EQ(back[i], t == Type::F16 ? ggl::fp16_to_f32(h) : ggl::bf16_to_f32(h));
    }
  }
}

TEST(Quant, RejectsUnsupportedTypesAndPartialBlocks) {
  std::vector<float> x(64);
  std::vector<uint8_t> buf(1024);
  EXPECT_THROW(ggl::quantize_row(Type::Q8_0, x.data(), buf.data(), 48), ggl::Error);
  EXPECT_THROW(ggl::dequantize_row(Type::Q4_0, buf.data(), x.data(), 17), ggl::Error);
  EXPECT_THROW(ggl::quantize_row(Type::I8, x.data(), buf.data(), 8), ggl::Error);
  EXPECT_FALSE(ggl::is_weight_type(Type::F64));
  EXPECT_TRUE(ggl::is_weight_type(Type::Q4_1));
}

}  // namespace test_quant
