// The IQ2 / IQ1 quants on synthetic data: the grids and the sign rule derived from the format's
// points (checked against entries of ggml's tables), the quantizers' search lattice, round-trip
// error bounds, and the importance matrix they need. Byte-exactness with llama.cpp's files is
// test_kquant_fixtures.cpp's job (IquantFile).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/quant/iq_grids.h"
#include "ggml-like/quant/iq_lattice.h"
#include "ggml-like/quant/quant.h"

namespace test_iquant {

using ggl::Type;

const Type kGridTypes[] = {Type::IQ2_XXS, Type::IQ2_XS, Type::IQ2_S, Type::IQ1_S, Type::IQ1_M};

std::vector<float> gaussian(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

std::vector<float> round_trip(Type t, const std::vector<float>& x, const float* importance) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(ggl::row_bytes(t, n));
  ggl::quantize_row(t, x.data(), q.data(), n, importance);
  std::vector<float> y(x.size());
  ggl::dequantize_row(t, q.data(), y.data(), n);
  return y;
}

// sqrt(sum w (x - y)^2 / sum w x^2).
double relative_error(const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& w) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += w[i] * (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    ref += w[i] * static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

// Entries of ggml's iq2xxs_grid, iq2xs_grid, iq2s_grid and iq1s_grid (ggml-common.h): index 1, one
// past the middle, and the last.
TEST(Iquant, GridsDerivedFromThePointsAreGgmlsTables) {
  EXPECT_EQ(ggl::kIq2xxsGrid.v[0], 0x0808080808080808ull);
  EXPECT_EQ(ggl::kIq2xxsGrid.v[1], 0x080808080808082bull);
  EXPECT_EQ(ggl::kIq2xxsGrid.v[131], 0x082b2b2b19081908ull);
  EXPECT_EQ(ggl::kIq2xxsGrid.v[255], 0x2b2b2b1908081908ull);
  EXPECT_EQ(ggl::kIq2xsGrid.v[1], 0x080808080808082bull);
  EXPECT_EQ(ggl::kIq2xsGrid.v[259], 0x190808080819082bull);
  EXPECT_EQ(ggl::kIq2xsGrid.v[511], 0x2b2b2b2b2b2b2b2bull);
  EXPECT_EQ(ggl::kIq2sGrid.v[1], 0x080808080808082bull);
  EXPECT_EQ(ggl::kIq2sGrid.v[515], 0x190808191908192bull);
  EXPECT_EQ(ggl::kIq2sGrid.v[1023], 0x2b2b2b2b2b2b2b2bull);
  EXPECT_EQ(ggl::kIq1sGrid.v[0], 0xffffffffffffffffull);
  EXPECT_EQ(ggl::kIq1sGrid.v[1], 0xffffffffffffff01ull);
  EXPECT_EQ(ggl::kIq1sGrid.v[1027], 0x000000000000ff01ull);
  EXPECT_EQ(ggl::kIq1sGrid.v[2047], 0x0101010101010101ull);
}

// ggml's ksigns_iq2xs: 7 stored signs and the eighth that makes their count even.
TEST(Iquant, EvenSignsAreGgmlsSignTable) {
  const uint32_t ksigns[][2] = {{0, 0}, {1, 129}, {2, 130}, {3, 3}, {7, 135}, {64, 192}, {126, 126}, {127, 255}};
  for (const auto& [seven, eight] : ksigns) EXPECT_EQ(ggl::iq_even_signs(seven), eight) << seven;
  for (uint32_t s = 0; s < 128; ++s) EXPECT_EQ(__builtin_popcount(ggl::iq_even_signs(s)) % 2, 0) << s;
  EXPECT_EQ(ggl::iq_even_signs(128 + 1), 129u) << "only 7 bits are read";
}

// Every point maps to its own index; a key that is no point lists grid points, nearest first.
TEST(Iquant, LatticeMapsPointsAndListsTheNearestOthers) {
  for (Type t : {Type::IQ2_XXS, Type::IQ2_XS, Type::IQ2_S, Type::IQ1_S}) {
    const auto& lattice = ggl::quant::IqLattice::of(t);
    int8_t levels[8];
    for (int k = 0; k < lattice.size(); ++k) {
      for (int i = 0; i < 8; ++i) levels[i] = static_cast<int8_t>((lattice.coordinate(k, i) - 1) / 2);
      ASSERT_EQ(lattice.index(ggl::quant::IqLattice::key(levels)), k) << ggl::type_name(t);
    }
    int checked = 0;
    for (uint32_t key = 0; key < 0x10000 && checked < 50; ++key) {
      bool ternary = true;
      for (int i = 0; i < 8; ++i) ternary = ternary && ((key >> (2 * i)) & 3) != 3;
      if (!ternary || lattice.index(static_cast<uint16_t>(key)) >= 0) continue;
      ++checked;
      int count = 0;
      const uint16_t* list = lattice.neighbours(static_cast<uint16_t>(key), &count);
      ASSERT_GT(count, 0) << ggl::type_name(t) << " key " << key;
      int last_d2 = -1, last_index = -1, rings = 0;
      for (int j = 0; j < count; ++j) {
        int d2 = 0;
        for (int i = 0; i < 8; ++i) {
          const int d = lattice.coordinate(list[j], i) - static_cast<int>(2 * ((key >> (2 * i)) & 3) + 1);
          d2 += d * d;
        }
        EXPECT_TRUE(d2 > last_d2 || (d2 == last_d2 && list[j] > last_index)) << ggl::type_name(t) << " key " << key;
        rings += d2 != last_d2;
        last_d2 = d2;
        last_index = list[j];
      }
      EXPECT_EQ(rings, t == Type::IQ2_S ? 1 : t == Type::IQ1_S ? 3 : 2) << ggl::type_name(t) << " key " << key;
    }
  }
}

// Error bounds on Gaussian rows quantized with a skewed importance (one column in eight counts 100
// times more): measured (about 0.25 for IQ2, 0.4 for IQ1) with a margin; the importance-weighted
// error is below the unweighted one's where the quantizer can do without importance.
TEST(Iquant, RoundTripErrorIsBoundedAndImportanceHelps) {
  constexpr int64_t kN = 4096;
  const std::vector<float> x = gaussian(kN, 5);
  std::vector<float> importance(kN, 1.0f);
  for (int64_t i = 0; i < kN; i += 8) importance[i] = 100.0f;
  for (Type t : kGridTypes) {
    const bool one_bit = t == Type::IQ1_S || t == Type::IQ1_M;
    const double err = relative_error(x, round_trip(t, x, importance.data()), importance);
    std::printf("[error] %-8s weighted relative rmse %.4f\n", ggl::type_name(t).data(), err);
    EXPECT_LT(err, one_bit ? 0.55 : 0.4) << ggl::type_name(t);
    if (!ggl::quantizer_requires_importance(t)) {
      const double plain = relative_error(x, round_trip(t, x, nullptr), importance);
      std::printf("[error] %-8s without importance %.4f\n", ggl::type_name(t).data(), plain);
      EXPECT_LT(err, plain) << ggl::type_name(t);
    }
  }
}

TEST(Iquant, AllZeroRowsGiveZeros) {
  const std::vector<float> zeros(512, 0.0f), ones(512, 1.0f);
  for (Type t : kGridTypes)
    for (float v : round_trip(t, zeros, ones.data())) ASSERT_EQ(v, 0.0f) << ggl::type_name(t);
}

TEST(Iquant, TypesThatNeedAnImportanceMatrixRefuseWithoutOne) {
  std::vector<float> x = gaussian(256, 1);
  std::vector<uint8_t> buf(1024);
  for (Type t : kGridTypes) {
    EXPECT_TRUE(ggl::is_weight_type(t)) << ggl::type_name(t);
    EXPECT_TRUE(ggl::quantizer_uses_importance(t)) << ggl::type_name(t);
    const bool required = t == Type::IQ2_XXS || t == Type::IQ2_XS || t == Type::IQ1_S;
    EXPECT_EQ(ggl::quantizer_requires_importance(t), required) << ggl::type_name(t);
    try {
      ggl::quantize_row(t, x.data(), buf.data(), 256);
      EXPECT_FALSE(required) << ggl::type_name(t) << " quantized without an importance matrix";
    } catch (const ggl::Error& e) {
      const std::string what = e.what();
      EXPECT_TRUE(required) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_NE(what.find(std::string(ggl::type_name(t)) + " needs an importance matrix"), std::string::npos) << what;
    }
  }
  EXPECT_FALSE(ggl::quantizer_requires_importance(Type::Q4_K));
  EXPECT_FALSE(ggl::quantizer_requires_importance(Type::IQ4_XS));
}

}  // namespace test_iquant
