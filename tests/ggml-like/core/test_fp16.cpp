// fp16 and bf16 conversions: every 16-bit pattern to f32, and f32 to 16 bits on halfway cases,
// overflow, subnormal results and NaNs, against independent double-precision references and,
// where the CPU has them, the F16C instructions.
#include <gtest/gtest.h>

#include <bit>
#include <cfenv>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ggml-like/core/fp16.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace test_fp16 {

bool is_nan16(uint16_t h, int mant_bits) {
  const uint16_t exp_mask = static_cast<uint16_t>((0x7fff >> mant_bits) << mant_bits);
  return (h & exp_mask) == exp_mask && (h & ((1u << mant_bits) - 1)) != 0;
}

// The value of a 16-bit float with `mant_bits` mantissa bits and exponent bias `bias`, from the
// definition of the format (finite patterns only).
double decode_by_definition(uint16_t h, int mant_bits, int bias) {
  const int exp = (h & 0x7fff) >> mant_bits;
  const int mant = h & ((1 << mant_bits) - 1);
  const double magnitude =
      exp == 0 ? std::ldexp(mant, 1 - bias - mant_bits) : std::ldexp((1 << mant_bits) + mant, exp - bias - mant_bits);
  return (h & 0x8000) ? -magnitude : magnitude;
}

// The correctly rounded (nearest, ties to even) value of x in a format with `mant_bits` mantissa
// bits, exponent bias `bias` and largest finite value `max_finite`, computed in double.
double round_by_definition(float xf, int mant_bits, int bias, double max_finite) {
  const double x = xf;
  const double a = std::fabs(x);
  if (std::isinf(a)) return x;
  const int min_exp = 1 - bias;  // exponent of the smallest normal
  int e = a == 0 ? min_exp : std::ilogb(a);
  if (e < min_exp) e = min_exp;  // subnormals share the smallest normal's spacing
  const double ulp = std::ldexp(1.0, e - mant_bits);
  const double q = std::nearbyint(a / ulp);  // a / ulp is exact; the default mode rounds ties to even
  double r = q * ulp;
  // Past the largest finite value by half an ulp or more (ties go to the even infinity): overflow.
  if (r > max_finite) r = std::numeric_limits<double>::infinity();
  return std::signbit(x) ? -r : r;
}

// The f32 inputs worth testing for a 16-bit format: every value of the format, the exact
// midpoints between neighbours and the floats just beside them, specials, and a sample of
// all 2^32 bit patterns.
std::vector<float> tricky_floats(float (*decode)(uint16_t), uint16_t largest_finite) {
  std::vector<float> v;
  for (uint32_t h = 0; h <= largest_finite; ++h) {
    const float lo = decode(static_cast<uint16_t>(h));
    // Past the largest finite value, the spacing continues as below it (the rounding boundary to inf).
    const float step =
        h < largest_finite ? decode(static_cast<uint16_t>(h + 1)) - lo : lo - decode(static_cast<uint16_t>(h - 1));
    const float mid = lo + step / 2;  // exact: a 16-bit format's midpoints need one more bit than it has
    for (float f : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), std::nextafter(lo, INFINITY)}) {
      v.push_back(f);
      v.push_back(-f);
    }
  }
  const float specials[] = {0.0f,
                            -0.0f,
                            INFINITY,
                            -INFINITY,
                            std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::min(),
                            0x1p-25f,
                            0x1p-26f,
                            0x1.8p-25f,
                            0x1p-24f,
                            65504.0f,
                            65519.99f,
                            65520.0f,
                            1e30f};
  for (float f : specials) {
    v.push_back(f);
    v.push_back(-f);
  }
  for (uint32_t bits = 0; bits < 0xffffffffu - 4099; bits += 4099) v.push_back(std::bit_cast<float>(bits));
  std::mt19937 rng(1234);
  for (int i = 0; i < 200000; ++i) v.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  return v;
}

TEST(Fp16, EveryPatternToF32MatchesTheDefinition) {
  for (uint32_t i = 0; i <= 0xffff; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = ggl::fp16_to_f32(h);
    if (is_nan16(h, 10)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << i;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << i;
    } else if ((h & 0x7fff) == 0x7c00) {
      ASSERT_EQ(f, (h & 0x8000) ? -INFINITY : INFINITY) << std::hex << i;
    } else {
      ASSERT_EQ(static_cast<double>(f), decode_by_definition(h, 10, 15)) << std::hex << i;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << i;  // -0 stays -0
    }
#if defined(__F16C__)
    ASSERT_EQ(std::bit_cast<uint32_t>(f), std::bit_cast<uint32_t>(_cvtsh_ss(h))) << "F16C differs at " << std::hex << i;
#endif
  }
}

TEST(Fp16, F32ToFp16RoundsToNearestEven) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  for (float f : tricky_floats(ggl::fp16_to_f32, 0x7bff)) {
    const uint16_t h = ggl::f32_to_fp16(f);
    const uint32_t bits = std::bit_cast<uint32_t>(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(is_nan16(h, 10)) << std::hex << bits;
      ASSERT_TRUE(h & 0x0200) << "NaN not quiet for " << std::hex << bits;
    } else {
      const double expected = round_by_definition(f, 10, 15, 65504.0);
      ASSERT_EQ(static_cast<double>(ggl::fp16_to_f32(h)), expected) << "input bits " << std::hex << bits;
      ASSERT_EQ((h & 0x8000) != 0, std::signbit(f)) << std::hex << bits;
    }
#if defined(__F16C__)
    ASSERT_EQ(h, _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)) << "F16C differs for input bits " << std::hex << bits;
#endif
  }
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(ggl::f32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(ggl::f32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(ggl::f32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(ggl::f32_to_fp16(65520.0f), 0x7c00);         // halfway to 65536: ties to the even inf
  EXPECT_EQ(ggl::f32_to_fp16(0x1p-24f), 0x0001);         // smallest subnormal
  EXPECT_EQ(ggl::f32_to_fp16(0x1p-25f), 0x0000);         // halfway to it: ties to even zero
  EXPECT_EQ(ggl::f32_to_fp16(0x1.8p-24f), 0x0002);       // 1.5 subnormal steps: ties to even 2
  EXPECT_EQ(ggl::f32_to_fp16(1.0f + 0x1p-11f), 0x3c00);  // tie, even mantissa stays
  EXPECT_EQ(ggl::f32_to_fp16(1.0f + 0x3p-11f), 0x3c02);  // tie, odd mantissa rounds up
  EXPECT_EQ(ggl::fp16_to_f32(0x0001), 0x1p-24f);
  EXPECT_EQ(ggl::fp16_to_f32(0x03ff), 0x3ffp-24f);
  EXPECT_EQ(ggl::fp16_to_f32(0x0400), 0x1p-14f);
}

TEST(Fp16, RowConversionsEqualScalar) {
  std::vector<uint16_t> all(0x10000 + 5);  // an odd length exercises the vector loops' tails
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i * 40503u);
  std::vector<float> f(all.size());
  ggl::fp16_to_f32_row(all.data(), f.data(), static_cast<int64_t>(all.size()));
  for (size_t i = 0; i < all.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(f[i]), std::bit_cast<uint32_t>(ggl::fp16_to_f32(all[i]))) << i;

  const std::vector<float> in = tricky_floats(ggl::fp16_to_f32, 0x7bff);
  std::vector<uint16_t> h(in.size());
  ggl::f32_to_fp16_row(in.data(), h.data(), static_cast<int64_t>(in.size()));
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(h[i], ggl::f32_to_fp16(in[i])) << i;

  ggl::bf16_to_f32_row(all.data(), f.data(), static_cast<int64_t>(all.size()));
  for (size_t i = 0; i < all.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(f[i]), std::bit_cast<uint32_t>(ggl::bf16_to_f32(all[i]))) << i;

  const std::vector<float> bf_in = tricky_floats(ggl::bf16_to_f32, 0x7f7f);
  h.resize(bf_in.size());
  ggl::f32_to_bf16_row(bf_in.data(), h.data(), static_cast<int64_t>(bf_in.size()));
  for (size_t i = 0; i < bf_in.size(); ++i) ASSERT_EQ(h[i], ggl::f32_to_bf16(bf_in[i])) << i;
}

TEST(Bf16, EveryPatternToF32MatchesTheDefinition) {
  for (uint32_t i = 0; i <= 0xffff; ++i) {
    const auto b = static_cast<uint16_t>(i);
    const float f = ggl::bf16_to_f32(b);
    if (is_nan16(b, 7)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << i;
    } else if ((b & 0x7fff) == 0x7f80) {
      ASSERT_EQ(f, (b & 0x8000) ? -INFINITY : INFINITY) << std::hex << i;
    } else {
      ASSERT_EQ(static_cast<double>(f), decode_by_definition(b, 7, 127)) << std::hex << i;
      ASSERT_EQ(std::signbit(f), (b & 0x8000) != 0) << std::hex << i;
    }
  }
}

TEST(Bf16, F32ToBf16RoundsToNearestEvenAndKeepsNaN) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  const double max_finite = decode_by_definition(0x7f7f, 7, 127);
  for (float f : tricky_floats(ggl::bf16_to_f32, 0x7f7f)) {
    const uint16_t b = ggl::f32_to_bf16(f);
    const uint32_t bits = std::bit_cast<uint32_t>(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(is_nan16(b, 7)) << "NaN lost for " << std::hex << bits;
      ASSERT_TRUE(b & 0x0040) << "NaN not quiet for " << std::hex << bits;
      ASSERT_EQ((b & 0x8000) != 0, std::signbit(f)) << std::hex << bits;
    } else {
      ASSERT_EQ(static_cast<double>(ggl::bf16_to_f32(b)), round_by_definition(f, 7, 127, max_finite))
          << "input bits " << std::hex << bits;
      ASSERT_EQ((b & 0x8000) != 0, std::signbit(f)) << std::hex << bits;
    }
  }
  // Signalling NaNs whose payload lies only in the dropped bits must not turn into infinity.
  EXPECT_TRUE(is_nan16(ggl::f32_to_bf16(std::bit_cast<float>(0x7f800001u)), 7));
  EXPECT_TRUE(is_nan16(ggl::f32_to_bf16(std::bit_cast<float>(0xff80ffffu)), 7));
  EXPECT_EQ(ggl::f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(ggl::f32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(ggl::f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(ggl::f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
}

}  // namespace test_fp16
