// IQ3_XXS / IQ3_S: the quantizers without an importance matrix against llama.cpp's bytes
// (tests/data/quant/iq3-no-imatrix.bin; the importance-weighted ones are test_kquant_fixtures.cpp's
// fixtures), the signs derived instead of tabled, and the dequantizers' layout.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "ggml-like/core/fp16.h"
#include "ggml-like/quant/iq3.h"
#include "ggml-like/quant/quant.h"
#include "tests/support/test_support.h"

namespace test_iq3 {

using ggl::Type;

constexpr int64_t kRows = 8, kN = 512;

std::vector<uint8_t> read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Iq3, QuantizersWithoutImportanceMatchTheReferenceBytes) {
  const auto data = read_all(latte::testing::test_data_dir() / "quant/iq3-no-imatrix.bin");
  const size_t xxs_row = ggl::row_bytes(Type::IQ3_XXS, kN), s_row = ggl::row_bytes(Type::IQ3_S, kN);
  ASSERT_EQ(data.size(), kRows * kN * sizeof(float) + kRows * (xxs_row + s_row));
  std::vector<float> x(kRows * kN);
  std::memcpy(x.data(), data.data(), x.size() * sizeof(float));
  const uint8_t* want_xxs = data.data() + x.size() * sizeof(float);
  const uint8_t* want_s = want_xxs + kRows * xxs_row;
  for (int64_t r = 0; r < kRows; ++r) {
    std::vector<uint8_t> got(s_row);
    ggl::quantize_row(Type::IQ3_XXS, x.data() + r * kN, got.data(), kN);
    EXPECT_EQ(std::memcmp(got.data(), want_xxs + r * xxs_row, xxs_row), 0) << "iq3_xxs row " << r;
    ggl::quantize_row(Type::IQ3_S, x.data() + r * kN, got.data(), kN);
    EXPECT_EQ(std::memcmp(got.data(), want_s + r * s_row, s_row), 0) << "iq3_s row " << r;
  }
}

// ggml's ksigns_iq2xs: the 7 stored bits, and an eighth that makes the count of negatives even.
TEST(Iq3, EighthSignIsTheParityOfTheSeven) {
  for (uint32_t bits = 0; bits < 128; ++bits) {
    const uint32_t s = ggl::iq_even_signs(bits);
    EXPECT_EQ(s & 127, bits);
    EXPECT_EQ(std::popcount(s) % 2, 0) << bits;
  }
  EXPECT_EQ(ggl::iq_even_signs(255 + 256), ggl::iq_even_signs(127));  // bits above the seven are not read
}

// Hand-made blocks: value = d * (0.5 + ls) * 0.5 * magnitude * sign (IQ3_XXS) and
// d * (1 + 2 ls) * magnitude * sign (IQ3_S), point by point where the layouts put them.
TEST(Iq3, DequantizersReadTheLayouts) {
  ggl::BlockIQ3_XXS xxs{};
  xxs.d = ggl::f32_to_fp16(2.0f);
  xxs.qs[8 * 3 + 5] = 5;                             // sub-block 3, point 5: kIq3XxsGrid[5] = 15 -> levels 7, 1, 0, 0
  const uint32_t word = (9u << 28) | (0x05u << 14);  // scale 9; group 2 (points 4, 5): bits 0 and 2
  for (int j = 0; j < 4; ++j) xxs.qs[64 + 4 * 3 + j] = static_cast<uint8_t>(word >> (8 * j));
  std::vector<float> y(256);
  ggl::dequantize_row(Type::IQ3_XXS, &xxs, y.data(), 256);
  const float db = 2.0f * 9.5f * 0.5f;
  // Group 2's signs: bits 0 and 2 set, even count, so bit 7 clear: values 0 and 2 of point 4 negative.
  EXPECT_EQ(y[96 + 16 + 0], -db * 4);
  EXPECT_EQ(y[96 + 16 + 2], -db * 4);
  EXPECT_EQ(y[96 + 20 + 0], db * 62);  // level 7 decodes to 62
  EXPECT_EQ(y[96 + 20 + 1], db * 12);
  EXPECT_EQ(y[96 + 20 + 2], db * 4);

  ggl::BlockIQ3_S s{};
  s.d = ggl::f32_to_fp16(0.5f);
  s.qs[8 * 6 + 3] = 1;        // sub-block 6, point 3: index 256 + 1 with the ninth bit
  s.qh[6] = 1 << 3;           // kIq3SGrid[257] = 1306 -> levels 2, 3, 4, 2
  s.signs[4 * 6 + 1] = 0xa0;  // values 8..15 of the sub-block: bits 5 and 7 -> values 13 and 15
  s.scales[3] = 0x40;         // sub-block 6: low nibble 0; sub-block 7: 4
  ggl::dequantize_row(Type::IQ3_S, &s, y.data(), 256);
  EXPECT_EQ(y[192 + 12], 0.5f * 5);
  EXPECT_EQ(y[192 + 13], -0.5f * 7);
  EXPECT_EQ(y[192 + 14], 0.5f * 9);
  EXPECT_EQ(y[192 + 15], -0.5f * 5);
  EXPECT_EQ(y[224], 0.5f * 9 * 1);  // sub-block 7, point 0 (index 0: all levels 0), scale 1 + 2 * 4
}

}  // namespace test_iq3
