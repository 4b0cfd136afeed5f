// Row dot products, matvec and the batched matmul for every weight type, checked against
// dequantize-then-multiply in double precision.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ggml-like/cpu/dot.h"
#include "ggml-like/core/error.h"
#include "ggml-like/quant/quant.h"

namespace test_dot {

using ggl::Type;

const Type kWeightTypes[] = {Type::F32,   Type::F16,    Type::BF16,    Type::Q8_0,    Type::Q4_0,   Type::Q4_1,
                             Type::Q5_0,  Type::Q5_1,   Type::Q2_K,    Type::Q3_K,    Type::Q4_K,   Type::Q5_K,
                             Type::Q6_K,  Type::IQ4_NL, Type::IQ4_XS,  Type::IQ2_XXS, Type::IQ2_XS, Type::IQ2_S,
                             Type::IQ1_S, Type::IQ1_M,  Type::IQ3_XXS, Type::IQ3_S};

// Row lengths that fill whole blocks of t (the super-block types skip 32, 64, 96, ...).
bool fits(Type t, int64_t n) { return n % ggl::traits(t).block_size == 0; }

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// A weight matrix in type t, plus its dequantized float copy (the exact weights the kernels see).
struct Matrix {
  Type type;
  int64_t rows, n;
  std::vector<uint8_t> data;
  std::vector<float> dequant;

  Matrix(Type t, int64_t rows_, int64_t n_, uint32_t seed) : type(t), rows(rows_), n(n_) {
    const std::vector<float> src = random_floats(static_cast<size_t>(rows * n), seed);
    const size_t stride = ggl::row_bytes(t, n);
    data.resize(stride * rows);
    dequant.resize(static_cast<size_t>(rows * n));
    // The types whose quantizer needs an importance matrix get a uniform one.
    const std::vector<float> importance(static_cast<size_t>(n), 1.0f);
    const float* weights = ggl::quantizer_requires_importance(t) ? importance.data() : nullptr;
    for (int64_t r = 0; r < rows; ++r) {
      ggl::quantize_row(t, src.data() + r * n, data.data() + r * stride, n, weights);
      ggl::dequantize_row(t, data.data() + r * stride, dequant.data() + r * n, n);
    }
  }
  const uint8_t* row(int64_t r) const { return data.data() + r * ggl::row_bytes(type, n); }
};

// The reference: sum of w*x in double, and sum |w*x| to scale the tolerance (float accumulation
// in any order is within a small multiple of eps * sum |w*x|).
struct Reference {
  double value = 0, magnitude = 0;
};
Reference reference_dot(const float* w, const float* x, int64_t n) {
  Reference r;
  for (int64_t i = 0; i < n; ++i) {
    r.value += static_cast<double>(w[i]) * x[i];
    r.magnitude += std::fabs(static_cast<double>(w[i]) * x[i]);
  }
  return r;
}

void expect_close(float got, const Reference& ref, const char* what) {
  const double tol = 1e-5 * ref.magnitude + 1e-30;
  EXPECT_NEAR(got, ref.value, tol) << what << " (sum |w*x| = " << ref.magnitude << ")";
}

class DotTest : public ::testing::TestWithParam<Type> {};

TEST_P(DotTest, DotRowMatchesDequantizedProduct) {
  const Type t = GetParam();
  for (int64_t n : {32, 64, 96, 1024, 4096 + 32, 4096 + 256}) {
    if (!fits(t, n)) continue;
    const Matrix m(t, 3, n, 11 + static_cast<uint32_t>(n));
    const std::vector<float> x = random_floats(static_cast<size_t>(n), 7);
    for (int64_t r = 0; r < m.rows; ++r) {
      const float got = ggl::dot_row(t, m.row(r), x.data(), n);
      expect_close(got, reference_dot(m.dequant.data() + r * n, x.data(), n), "dot_row");
    }
  }
}

TEST_P(DotTest, MatvecMatchesDequantizedProduct) {
  const Type t = GetParam();
  const int64_t rows = 37, n = 512;
  const Matrix m(t, rows, n, 3);
  const std::vector<float> x = random_floats(static_cast<size_t>(n), 4, 3.0f);
  std::vector<float> y(rows, NAN);
  ggl::matvec(t, m.data.data(), rows, n, x.data(), y.data());
  for (int64_t r = 0; r < rows; ++r) expect_close(y[r], reference_dot(m.dequant.data() + r * n, x.data(), n), "matvec");
}

// Strided columns, every column count up to past two tiles, and a partial row range: rows outside
// [row_begin, row_end) and padding between columns must stay untouched.
TEST_P(DotTest, MatmulMatchesDequantizedProductForEveryColumnCount) {
  const Type t = GetParam();
  const int64_t rows = 19, n = 256, x_stride = n + 5, y_stride = rows + 3;
  const Matrix m(t, rows, n, 5);
  for (int64_t n_cols = 1; n_cols <= 11; ++n_cols) {
    const std::vector<float> x = random_floats(static_cast<size_t>(x_stride * n_cols), 100 + n_cols);
    const float sentinel = -12345.0f;
    std::vector<float> y(static_cast<size_t>(y_stride * n_cols), sentinel);
    const int64_t row_begin = 2, row_end = 17;
    ggl::matmul(t, m.data.data(), rows, n, x.data(), x_stride, n_cols, y.data(), y_stride, row_begin, row_end);
    for (int64_t c = 0; c < n_cols; ++c) {
      for (int64_t r = 0; r < y_stride; ++r) {
        const float got = y[c * y_stride + r];
        if (r < row_begin || r >= row_end) {
          EXPECT_EQ(got, sentinel) << "row " << r << " col " << c << " written outside the range";
        } else {
          expect_close(got, reference_dot(m.dequant.data() + r * n, x.data() + c * x_stride, n), "matmul");
        }
      }
    }
  }
}

// The batched kernel must give exactly what one column at a time gives: row counts that leave
// partial row tiles, and matrices large enough to be processed in several blocks of rows.
TEST_P(DotTest, MatmulColumnsEqualMatvec) {
  const Type t = GetParam();
  const int64_t n_cols = 7;
  for (auto [rows, n] : {std::pair<int64_t, int64_t>{13, 1024}, {130, 4096}}) {
    const Matrix m(t, rows, n, 9);
    const std::vector<float> x = random_floats(static_cast<size_t>(n * n_cols), 10);
    std::vector<float> y(static_cast<size_t>(rows * n_cols));
    ggl::matmul(t, m.data.data(), rows, n, x.data(), n, n_cols, y.data(), rows, 0, rows);
    for (int64_t c = 0; c < n_cols; ++c) {
      std::vector<float> single(rows);
      ggl::matvec(t, m.data.data(), rows, n, x.data() + c * n, single.data());
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(y[c * rows + r], single[r]) << "rows " << rows << ": row " << r << " col " << c;
        expect_close(single[r], reference_dot(m.dequant.data() + r * n, x.data() + c * n, n), "matvec");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, DotTest, ::testing::ValuesIn(kWeightTypes),
                         [](const auto& info) { return std::string(ggl::type_name(info.param)); });

// Plain types accept any row length; the tail after the last full chunk of 32 must count.
TEST(Dot, PlainTypesHandleRowsThatAreNotMultiplesOf32) {
  for (Type t : {Type::F32, Type::F16, Type::BF16}) {
    for (int64_t n : {1, 5, 31, 33, 47, 100}) {
      const Matrix m(t, 2, n, 21);
      const std::vector<float> x = random_floats(static_cast<size_t>(n), 22);
      for (int64_t r = 0; r < 2; ++r)
        expect_close(ggl::dot_row(t, m.row(r), x.data(), n), reference_dot(m.dequant.data() + r * n, x.data(), n),
                     "tail");
    }
  }
}

// decode_row gives the weights the products use: the stored values, to float rounding (d * q + m
// and d * q - m may fuse), for block types and for plain rows of any length.
TEST(Dot, DecodeRowGivesTheStoredWeights) {
  for (Type t : kWeightTypes)
    for (int64_t n : {32, 96, 37, 1, 512}) {
      if (!fits(t, n)) continue;
      const Matrix m(t, 2, n, 31);
      std::vector<float> got(static_cast<size_t>(n));
      for (int64_t r = 0; r < 2; ++r) {
        ggl::decode_row(t, m.row(r), got.data(), n);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_NEAR(got[i], m.dequant[r * n + i], 1e-6f * (1.0f + std::fabs(m.dequant[r * n + i])))
              << ggl::type_name(t) << " n " << n << " row " << r << " at " << i;
      }
    }
  std::vector<uint8_t> w(64);
  std::vector<float> out(64);
  EXPECT_THROW(ggl::decode_row(Type::Q4_0, w.data(), out.data(), 33), ggl::Error);
}

TEST(Dot, RejectsBadShapesAndTypes) {
  std::vector<uint8_t> w(1024);
  std::vector<float> x(64), y(4);
  EXPECT_THROW(ggl::dot_row(Type::Q8_0, w.data(), x.data(), 33), ggl::Error);
  EXPECT_THROW(ggl::dot_row(Type::I32, w.data(), x.data(), 32), ggl::Error);
  EXPECT_THROW(ggl::matmul(Type::F32, w.data(), 2, 32, x.data(), 32, 1, y.data(), 2, 0, 3), ggl::Error);
  EXPECT_THROW(ggl::matmul(Type::F32, w.data(), 2, 32, x.data(), 32, 1, y.data(), 2, 2, 1), ggl::Error);
}

}  // namespace test_dot
