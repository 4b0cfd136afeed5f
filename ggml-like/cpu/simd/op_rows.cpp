// Row movers: get_rows (gather + convert to f32), concat, cont (any type -> packed f32) and copy
// (f32 -> any type, e.g. into a cache).
#include <cstring>

#include "ggml-like/cpu/op_thread.h"
#include "ggml-like/quant/quant.h"

#include "ggml-like/cpu/simd/set_declarations.h"

namespace ggl::GGL_ISA {

void cpu_get_rows(const Tensor& dst, const CpuThread& th) {
  const Tensor& table = *dst.src[0];
  const Tensor& ids = *dst.src[1];
  auto [r0, r1] = split_range(dst.n_rows(), th.ith, th.nth);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t i1 = r % dst.ne[1], i2 = (r / dst.ne[1]) % dst.ne[2], i3 = r / (dst.ne[1] * dst.ne[2]);
    const int32_t id = ids.i32_row(i2, i3)[i1];
    float* out = dst.f32_row(i1, i2, i3);
    if (id < 0 || id >= table.ne[1]) {  // callers validate ids; never read outside the table
      std::memset(out, 0, dst.ne[0] * sizeof(float));
      continue;
    }
    dequantize_row(table.type, table.row(id, i2 % table.ne[2], i3 % table.ne[3]), out, dst.ne[0]);
  }
}

void cpu_concat(const Tensor& dst, const CpuThread& th) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  const int dim = dst.params[0].i;
  auto [r0, r1] = split_range(dst.n_rows(), th.ith, th.nth);
  for (int64_t r = r0; r < r1; ++r) {
    int64_t ix[kMaxDims] = {0, r % dst.ne[1], (r / dst.ne[1]) % dst.ne[2], r / (dst.ne[1] * dst.ne[2])};
    float* y = dst.f32_row(ix[1], ix[2], ix[3]);
    auto row_of = [&ix](const Tensor& s, int64_t shift_dim, int64_t shift) {
      int64_t j[kMaxDims];
      for (int d = 1; d < kMaxDims; ++d) j[d] = (d == shift_dim ? ix[d] - shift : ix[d]) % s.ne[d];
      return s.f32_row(j[1], j[2], j[3]);
    };
    if (dim == 0) {
      std::memcpy(y, row_of(a, -1, 0), a.ne[0] * sizeof(float));
      std::memcpy(y + a.ne[0], row_of(b, -1, 0), b.ne[0] * sizeof(float));
    } else if (ix[dim] < a.ne[dim]) {
      std::memcpy(y, row_of(a, -1, 0), dst.ne[0] * sizeof(float));
    } else {
      std::memcpy(y, row_of(b, dim, a.ne[dim]), dst.ne[0] * sizeof(float));
    }
  }
}

void cpu_cont(const Tensor& dst, const CpuThread& th) {
  const Tensor& a = *dst.src[0];
  auto [r0, r1] = split_range(dst.n_rows(), th.ith, th.nth);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t i1 = r % dst.ne[1], i2 = (r / dst.ne[1]) % dst.ne[2], i3 = r / (dst.ne[1] * dst.ne[2]);
    dequantize_row(a.type, a.row(i1, i2, i3), dst.f32_row(i1, i2, i3), dst.ne[0]);
  }
}

void cpu_copy(const Tensor& dst, const CpuThread& th) {
  const Tensor& src = *dst.src[0];
  auto [r0, r1] = split_range(dst.n_rows(), th.ith, th.nth);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t i1 = r % dst.ne[1], i2 = (r / dst.ne[1]) % dst.ne[2], i3 = r / (dst.ne[1] * dst.ne[2]);
    quantize_row(dst.type, src.f32_row(i1, i2, i3), dst.row(i1, i2, i3), dst.ne[0]);
  }
}

}  // namespace ggl::GGL_ISA
