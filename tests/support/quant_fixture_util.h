// Quantizing a reference file's F32 tensor with latte's quantizer and comparing the bytes with
// the reference's quantized tensor, block by block (test_quant.cpp, test_kquant_fixtures.cpp).
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ggml-like/gguf/gguf.h"
#include "ggml-like/quant/quant.h"

namespace latte::testing {

struct BlockComparison {
  size_t differing = 0;  // blocks whose bytes differ
  size_t first = 0;      // the first of them
  size_t blocks = 0;
};

// Quantizes src (F32, same shape as q) row by row to q's type and compares with q's bytes.
// importance: nullptr, or an importance matrix's entry for the tensor (ne0 weights per matrix of
// ne1 rows), which reaches each row's quantizer as `latte quantize --imatrix` passes it.
inline BlockComparison quantize_and_compare(const ggl::TensorInfo& src, const ggl::TensorInfo& q,
                                            const float* importance = nullptr) {
  const int64_t n = q.ne[0];
  const int64_t rows = q.n_elements() / n;
  const size_t stride = ggl::row_bytes(q.type, n);
  EXPECT_EQ(q.nbytes, stride * rows) << q.name;
  std::vector<uint8_t> mine(stride * rows);
  const auto* x = reinterpret_cast<const float*>(src.data);
  for (int64_t r = 0; r < rows; ++r)
    ggl::quantize_row(q.type, x + r * n, mine.data() + r * stride, n,
                      importance ? importance + (r / q.ne[1]) * n : nullptr);

  BlockComparison c;
  const size_t block_bytes = ggl::traits(q.type).block_bytes;
  c.blocks = mine.size() / block_bytes;
  for (size_t off = 0; off < mine.size(); off += block_bytes)
    if (std::memcmp(mine.data() + off, q.data + off, block_bytes) != 0 && c.differing++ == 0)
      c.first = off / block_bytes;
  return c;
}

}  // namespace latte::testing
