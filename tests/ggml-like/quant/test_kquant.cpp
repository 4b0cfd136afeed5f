// The Q5, K-quant, IQ4 and Q8_K quantizers on synthetic data: round-trip error bounds on Gaussian
// rows, the importance-weighted
// variants lowering the weighted error, hand-checked layouts, and rejected input. Byte-exactness
// with llama.cpp's files is test_kquant_fixtures.cpp's job.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/core/fp16.h"
#include "ggml-like/quant/quant.h"
#include "ggml-like/quant/search.h"

namespace test_kquant {

using ggl::Type;

const Type kNewTypes[] = {Type::Q5_0, Type::Q5_1, Type::Q2_K,   Type::Q3_K,  Type::Q4_K,
                          Type::Q5_K, Type::Q6_K, Type::IQ4_NL, Type::IQ4_XS};

std::vector<uint8_t> quantize(Type t, const std::vector<float>& x, const float* importance = nullptr) {
  std::vector<uint8_t> out(ggl::row_bytes(t, static_cast<int64_t>(x.size())));
  ggl::quantize_row(t, x.data(), out.data(), static_cast<int64_t>(x.size()), importance);
  return out;
}

std::vector<float> dequantize(Type t, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  ggl::dequantize_row(t, q.data(), out.data(), n);
  return out;
}

std::vector<float> round_trip(Type t, const std::vector<float>& x, const float* importance = nullptr) {
  return dequantize(t, quantize(t, x, importance), static_cast<int64_t>(x.size()));
}

double rmse(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return std::sqrt(sum / static_cast<double>(a.size()));
}

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// Bits per quant of each type, for the error bound below.
int bits(Type t) {
  switch (t) {
    case Type::Q2_K: return 2;
    case Type::Q3_K: return 3;
    case Type::Q4_K:
    case Type::IQ4_NL:
    case Type::IQ4_XS: return 4;
    case Type::Q6_K: return 6;
    default: return 5;
  }
}

// Gaussian rows: the RMS error is at most that of a uniform quantizer with 2^b levels spanning
// +-2.5 sigma (about the extremes of a 32-value block), step / sqrt(12). A wrong bit layout or
// scale gives errors of the order of sigma itself.
TEST(Kquant, RoundTripErrorOnGaussianRowsIsThatOfItsBits) {
  const auto x = gaussian(256 * 64, 1, 3.0f);
  for (Type t : kNewTypes) {
    const double step = 5.0 / ((1 << bits(t)) - 1);
    const double err = rmse(x, round_trip(t, x)) / 3.0;
    std::printf("[round trip] %-6s rmse/sigma %.4f (bound %.4f)\n", ggl::type_name(t).data(), err,
                step / std::sqrt(12.0));
    EXPECT_LE(err, step / std::sqrt(12.0)) << ggl::type_name(t);
  }
}

// Importance-weighted error sum_j importance_j (x_j - x'_j)^2 over rows of n.
double weighted_error(Type t, const std::vector<float>& x, int64_t n, const std::vector<float>& importance, bool use) {
  double sum = 0;
  for (size_t r = 0; r < x.size() / n; ++r) {
    const std::vector<float> row(x.begin() + r * n, x.begin() + (r + 1) * n);
    const auto back = round_trip(t, row, use ? importance.data() : nullptr);
    for (int64_t j = 0; j < n; ++j) sum += importance[j] * (row[j] - back[j]) * (row[j] - back[j]);
  }
  return sum;
}

// A skewed importance vector (one column in eight matters 100 times more, as an imatrix's hot
// input channels do): the weighted quantizers must lower the weighted error against the plain
// ones, for every type that takes importance.
TEST(Kquant, ImportanceLowersTheWeightedError) {
  const int64_t n = 512;
  const auto x = gaussian(n * 32, 7);
  std::vector<float> importance(n);
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> jitter(0.5f, 1.5f);
  for (int64_t j = 0; j < n; ++j) importance[j] = (j % 8 == 3 ? 100.0f : 1.0f) * jitter(rng);
  for (Type t : {Type::Q4_0, Type::Q4_1, Type::Q5_0, Type::Q5_1, Type::Q2_K, Type::Q3_K, Type::Q4_K, Type::Q5_K,
                 Type::Q6_K, Type::IQ4_NL, Type::IQ4_XS}) {
    ASSERT_TRUE(ggl::quantizer_uses_importance(t)) << ggl::type_name(t);
    const double plain = weighted_error(t, x, n, importance, false);
    const double weighted = weighted_error(t, x, n, importance, true);
    std::printf("[importance] %-6s weighted error %.4g -> %.4g (%.2fx)\n", ggl::type_name(t).data(), plain, weighted,
                weighted / plain);
    EXPECT_LT(weighted, 0.9 * plain) << ggl::type_name(t);
  }
}

// ggml's nearest_int rounds half to even (the float magic-number trick), unlike std::round.
TEST(Kquant, NearestIntRoundsHalfToEven) {
  using ggl::quant::nearest_int;
  EXPECT_EQ(nearest_int(0.5f), 0);
  EXPECT_EQ(nearest_int(1.5f), 2);
  EXPECT_EQ(nearest_int(2.5f), 2);
  EXPECT_EQ(nearest_int(-0.5f), 0);
  EXPECT_EQ(nearest_int(-1.5f), -2);
  EXPECT_EQ(nearest_int(-2.49f), -2);
  EXPECT_EQ(nearest_int(31.51f), 32);
}

// A hand-built Q4_K super-block: sub-block 5's scale and min live in the split 6-bit encoding
// (low 4 bits in byte 9, high 2 bits in the top of bytes 1 and 5); its quants are the high nibbles
// of qs[64..95].
TEST(Kquant, Q4_KDecodesItsPackedScalesAndNibbles) {
  ggl::BlockQ4_K b{};
  b.d = ggl::f32_to_fp16(0.5f);
  b.dmin = ggl::f32_to_fp16(0.25f);
  const int sc = 37, m = 22;  // 0b100101, 0b010110
  b.scales[9] = static_cast<uint8_t>((sc & 15) | ((m & 15) << 4));
  b.scales[1] = static_cast<uint8_t>((sc >> 4) << 6);
  b.scales[5] = static_cast<uint8_t>((m >> 4) << 6);
  for (int l = 0; l < 32; ++l) b.qs[64 + l] = static_cast<uint8_t>((l % 16) << 4);
  std::vector<float> y(256);
  ggl::dequantize_row(Type::Q4_K, &b, y.data(), 256);
  for (int l = 0; l < 32; ++l) EXPECT_EQ(y[160 + l], 0.5f * sc * (l % 16) - 0.25f * m) << l;
  EXPECT_EQ(y[0], 0.0f);  // sub-block 0: scale 0, min 0
}

// Q5_0's fifth bit of element j is bit j of qh; value d * (q - 16).
TEST(Kquant, Q5_0DecodesItsFifthBit) {
  ggl::BlockQ5_0 b{};
  b.d = ggl::f32_to_fp16(2.0f);
  b.qh[2] = 0x01;  // element 16
  b.qs[0] = 0x3f;  // element 0: 15, element 16: 3 (+16 = 19)
  std::vector<float> y(32);
  ggl::dequantize_row(Type::Q5_0, &b, y.data(), 32);
  EXPECT_EQ(y[0], 2.0f * (15 - 16));
  EXPECT_EQ(y[16], 2.0f * (19 - 16));
  EXPECT_EQ(y[1], 2.0f * -16);
}

TEST(Kquant, AllZeroRowsDecodeToZero) {
  const std::vector<float> zeros(512, 0.0f);
  for (Type t : kNewTypes) {
    for (float v : round_trip(t, zeros)) ASSERT_EQ(v, 0.0f) << ggl::type_name(t);
  }
}

// Q8_K: value d * q with d = max / -127 (symmetric: the largest magnitude maps to -127), and the
// sums of each 16 quants.
TEST(Kquant, Q8_KQuantizesSymmetricallyWithBlockSums) {
  const auto x = gaussian(512, 3, 2.0f);
  const auto q = quantize(Type::Q8_K, x);
  ASSERT_EQ(q.size(), 2 * sizeof(ggl::BlockQ8_K));
  const auto back = dequantize(Type::Q8_K, q, 512);
  for (int b = 0; b < 2; ++b) {
    ggl::BlockQ8_K blk;
    std::memcpy(&blk, q.data() + b * sizeof blk, sizeof blk);
    float amax = 0;
    for (int j = 0; j < 256; ++j) amax = std::max(amax, std::fabs(x[256 * b + j]));
    EXPECT_FLOAT_EQ(std::fabs(blk.d), amax / 127);
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += blk.qs[16 * g + j];
      EXPECT_EQ(blk.bsums[g], sum);
    }
    for (int j = 0; j < 256; ++j) {
      EXPECT_GE(blk.qs[j], -127);
      EXPECT_NEAR(back[256 * b + j], x[256 * b + j], 0.5f * amax / 127 * 1.0001f);
    }
  }
  EXPECT_FALSE(ggl::is_weight_type(Type::Q8_K));
  EXPECT_FALSE(ggl::quantizer_uses_importance(Type::Q8_K));
}

// Rows that do not fill whole blocks, bad importance and non-row types: one-line errors.
TEST(Kquant, RejectsPartialBlocksAndBadImportance) {
  std::vector<float> x(512, 1.0f);
  std::vector<uint8_t> buf(4096);
  auto expect_one_line_error = [](auto&& call, const std::string& mentions) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one mentioning " << mentions;
    } catch (const ggl::Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_NE(what.find(mentions), std::string::npos) << what;
    }
  };
  for (Type t : {Type::Q2_K, Type::Q3_K, Type::Q4_K, Type::Q5_K, Type::Q6_K, Type::IQ4_XS, Type::Q8_K}) {
    expect_one_line_error([&] { ggl::quantize_row(t, x.data(), buf.data(), 128); }, "block size 256");
    expect_one_line_error([&] { ggl::dequantize_row(t, buf.data(), x.data(), 300); }, "block size 256");
  }
  for (Type t : {Type::Q5_0, Type::Q5_1, Type::IQ4_NL})
    expect_one_line_error([&] { ggl::quantize_row(t, x.data(), buf.data(), 48); }, "block size 32");
  std::vector<float> importance(256, 1.0f);
  importance[7] = -1.0f;
  expect_one_line_error([&] { ggl::quantize_row(Type::Q4_K, x.data(), buf.data(), 256, importance.data()); },
                        "importance of column 7");
  importance[7] = NAN;
  expect_one_line_error([&] { ggl::quantize_row(Type::IQ4_XS, x.data(), buf.data(), 256, importance.data()); },
                        "importance of column 7");
  expect_one_line_error([&] { ggl::quantize_row(Type::I32, x.data(), buf.data(), 8); }, "unsupported type");
}

TEST(Kquant, WeightTypesAndImportanceUsers) {
  for (Type t : kNewTypes) {
    EXPECT_TRUE(ggl::is_weight_type(t)) << ggl::type_name(t);
    EXPECT_TRUE(ggl::quantizer_uses_importance(t)) << ggl::type_name(t);
  }
  for (Type t : {Type::F32, Type::F16, Type::BF16, Type::Q8_0}) EXPECT_FALSE(ggl::quantizer_uses_importance(t));
}

}  // namespace test_kquant
