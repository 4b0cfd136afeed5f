// Row-wise and element-wise kernels: rms_norm, add/mul/div with broadcast, scale, sigmoid, silu,
// swiglu, sum_rows, softmax. Sources may be strided views (rows contiguous); results are packed.
#include <xsimd/xsimd.hpp>

#include <cmath>

#include "ggml-like/cpu/arch/avx512_undefined.h"
#include "ggml-like/cpu/op_thread.h"

#include "ggml-like/cpu/simd/set_declarations.h"

namespace ggl::GGL_ISA {
namespace {

struct RowIndex {
  int64_t i1, i2, i3;
};

inline RowIndex row_index(const Tensor& t, int64_t r) {
  return {r % t.ne[1], (r / t.ne[1]) % t.ne[2], r / (t.ne[1] * t.ne[2])};
}

inline const float* src_row(const Tensor& s, const RowIndex& ix) {
  return s.f32_row(ix.i1 % s.ne[1], ix.i2 % s.ne[2], ix.i3 % s.ne[3]);
}

using Floats = xsimd::batch<float>;
constexpr int64_t kLanes = static_cast<int64_t>(Floats::size);

// The exponentials of sigmoid, silu and swiglu go through xsimd's vector exp (within a few ulp of
// std::exp): a decode step's swiglu of the shared experts' 2816 values took ~19 us element by element.
GGL_AVX512_UNDEFINED_BEGIN
template <class T>
inline T sigmoid(T x) {
  using std::exp;
  using xsimd::exp;
  return T(1.0f) / (T(1.0f) + exp(-x));
}
template <class T>
inline T silu(T x) {
  using std::exp;
  using xsimd::exp;
  return x / (T(1.0f) + exp(-x));
}
GGL_AVX512_UNDEFINED_END

// y[i] = f(x[i]) (f takes vectors and floats), a vector at a time.
template <class F>
inline void map_row(const float* x, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) f(Floats::load_unaligned(x + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = f(x[i]);
}

}  // namespace

void cpu_rms_norm(const Tensor& dst, const CpuThread& th) {
  const Tensor& a = *dst.src[0];
  const float eps = dst.params[0].f;
  const int64_t n = a.ne[0];
  auto [r0, r1] = split_range(dst.n_rows(), th.ith, th.nth);
  for (int64_t r = r0; r < r1; ++r) {
    const RowIndex ix = row_index(dst, r);
    const float* x = a.f32_row(ix.i1, ix.i2, ix.i3);
    float* y = dst.f32_row(ix.i1, ix.i2, ix.i3);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
    const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

void cpu_binary(const Tensor& dst, const CpuThread& th) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  const int64_t n = dst.ne[0], nb0 = b.ne[0];
  auto [r0, r1] = split_range(dst.n_rows(), th.ith, th.nth);
  for (int64_t r = r0; r < r1; ++r) {
    const RowIndex ix = row_index(dst, r);
    const float* x = a.f32_row(ix.i1, ix.i2, ix.i3);
    const float* y = src_row(b, ix);
    float* z = dst.f32_row(ix.i1, ix.i2, ix.i3);
    switch (dst.op) {
      case Op::kAdd:
        if (nb0 == n)
          for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
        else
          for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i % nb0];
        break;
      case Op::kMul:
        if (nb0 == n)
          for (int64_t i = 0; i < n; ++i) z[i] = x[i] * y[i];
        else
          for (int64_t i = 0; i < n; ++i) z[i] = x[i] * y[i % nb0];
        break;
      default:
        if (nb0 == n)
          for (int64_t i = 0; i < n; ++i) z[i] = x[i] / y[i];
        else
          for (int64_t i = 0; i < n; ++i) z[i] = x[i] / y[i % nb0];
        break;
    }
  }
}

void cpu_unary(const Tensor& dst, const CpuThread& th) {
  const Tensor& a = *dst.src[0];
  const int64_t n = dst.ne[0];
  const float s = dst.params[0].f;
  auto [r0, r1] = split_range(dst.n_rows(), th.ith, th.nth);
  for (int64_t r = r0; r < r1; ++r) {
    const RowIndex ix = row_index(dst, r);
    const float* x = a.f32_row(ix.i1, ix.i2, ix.i3);
    float* y = dst.f32_row(ix.i1, ix.i2, ix.i3);
    switch (dst.op) {
      case Op::kScale:
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
        break;
      case Op::kSigmoid: map_row(x, y, n, [](auto v) { return sigmoid(v); }); break;
      default: map_row(x, y, n, [](auto v) { return silu(v); }); break;
    }
  }
}

void cpu_swiglu(const Tensor& dst, const CpuThread& th) {
  const Tensor& g = *dst.src[0];
  const Tensor& u = *dst.src[1];
  const int64_t n = dst.ne[0];
  auto [r0, r1] = split_range(dst.n_rows(), th.ith, th.nth);
  for (int64_t r = r0; r < r1; ++r) {
    const RowIndex ix = row_index(dst, r);
    const float* x = g.f32_row(ix.i1, ix.i2, ix.i3);
    const float* y = u.f32_row(ix.i1, ix.i2, ix.i3);
    float* z = dst.f32_row(ix.i1, ix.i2, ix.i3);
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      (silu(Floats::load_unaligned(x + i)) * Floats::load_unaligned(y + i)).store_unaligned(z + i);
    for (; i < n; ++i) z[i] = silu(x[i]) * y[i];
  }
}

void cpu_sum_rows(const Tensor& dst, const CpuThread& th) {
  const Tensor& a = *dst.src[0];
  auto [r0, r1] = split_range(dst.n_rows(), th.ith, th.nth);
  for (int64_t r = r0; r < r1; ++r) {
    const RowIndex ix = row_index(dst, r);
    const float* x = a.f32_row(ix.i1, ix.i2, ix.i3);
    double sum = 0.0;
    for (int64_t i = 0; i < a.ne[0]; ++i) sum += x[i];
    dst.f32_row(ix.i1, ix.i2, ix.i3)[0] = static_cast<float>(sum);
  }
}

void cpu_softmax(const Tensor& dst, const CpuThread& th) {
  const Tensor& a = *dst.src[0];
  const int64_t n = dst.ne[0];
  auto [r0, r1] = split_range(dst.n_rows(), th.ith, th.nth);
  for (int64_t r = r0; r < r1; ++r) {
    const RowIndex ix = row_index(dst, r);
    const float* x = a.f32_row(ix.i1, ix.i2, ix.i3);
    float* y = dst.f32_row(ix.i1, ix.i2, ix.i3);
    float max = -INFINITY;
    for (int64_t i = 0; i < n; ++i) max = std::fmax(max, x[i]);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      y[i] = std::exp(x[i] - max);
      sum += y[i];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  }
}

}  // namespace ggl::GGL_ISA
