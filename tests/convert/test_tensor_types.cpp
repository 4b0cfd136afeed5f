// encode_rows (convert/tensor_types.h): the rows its quantizer encodes in parallel.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "convert/tensor_types.h"
#include "ggml-like/core/types.h"

namespace test_tensor_types {

// A quantizer that throws on one row: the error reaches the caller (an exception escaping the
// parallel loop would end the process instead), and no later chunk is encoded.
TEST(EncodeRows, AQuantizerErrorReachesTheCaller) {
  const int64_t ne0 = 32, rows = 64;
  std::vector<uint8_t> dst(ggl::row_bytes(ggl::Type::Q8_0, ne0) * rows);
  auto fill = [&](int64_t, int64_t n, float* out) {
    for (int64_t i = 0; i < n * ne0; ++i) out[i] = 0.5f;
  };
  auto quantizer = [&](ggl::Type, const float* src, void*, int64_t, const float*) {
    if (src[0] == 0.5f) throw std::runtime_error("row refused");
  };
  try {
    latte::convert::encode_rows(ggl::Type::Q8_0, ne0, rows, fill, dst.data(), {}, quantizer);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "row refused");
  }
}

}  // namespace test_tensor_types
