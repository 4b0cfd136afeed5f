#include "ggml-like/quant/interleaved.h"

#include <cstring>

#include "ggml-like/core/error.h"
#include "ggml-like/quant/legacy.h"

namespace ggl {
namespace {

constexpr size_t kScalesBytes = kInterleavedRows * sizeof(uint16_t);
constexpr size_t kQuadBytes = 4;  // one row's bytes per 32-bit lane
constexpr size_t kQuads = kQuantBlock / 2 / kQuadBytes;
constexpr size_t kGroupBlockBytes = kInterleavedRows * sizeof(BlockQ4_0);
static_assert(kGroupBlockBytes == kScalesBytes + kQuads * kInterleavedRows * kQuadBytes);

void check(const char* what, Type t, int64_t n) {
  if (t != Type::Q4_0_R8) fail("{}: {} is not an interleaved type", what, type_name(t));
  if (n <= 0 || n % kQuantBlock != 0) fail("{}: rows of {} elements are not whole blocks", what, n);
}

}  // namespace

std::optional<Type> interleaved_type(Type t, int64_t n_rows) {
  if (t == Type::Q4_0 && n_rows > 0 && n_rows % kInterleavedRows == 0) return Type::Q4_0_R8;
  return std::nullopt;
}

bool is_interleaved(Type t) { return t == Type::Q4_0_R8; }

Type plain_type(Type t) { return t == Type::Q4_0_R8 ? Type::Q4_0 : t; }

void interleave_rows(Type t, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t n) {
  check("interleave_rows", t, n);
  if (rows % kInterleavedRows != 0) fail("interleave_rows: {} rows are not whole groups of 8", rows);
  const int64_t blocks = n / kQuantBlock;
  const size_t row_stride = static_cast<size_t>(blocks) * sizeof(BlockQ4_0);
  for (int64_t g = 0; g < rows / kInterleavedRows; ++g) {
    const uint8_t* first = src + g * kInterleavedRows * row_stride;
    uint8_t* out = dst + g * kInterleavedRows * row_stride;
    for (int64_t b = 0; b < blocks; ++b, out += kGroupBlockBytes)
      for (int64_t r = 0; r < kInterleavedRows; ++r) {
        const auto* block = reinterpret_cast<const BlockQ4_0*>(first + r * row_stride) + b;
        std::memcpy(out + r * sizeof(uint16_t), &block->d, sizeof(uint16_t));
        for (size_t u = 0; u < kQuads; ++u)
          std::memcpy(out + kScalesBytes + (u * kInterleavedRows + r) * kQuadBytes, block->qs + u * kQuadBytes,
                      kQuadBytes);
      }
  }
}

void deinterleave_block(const uint8_t* group, int64_t b, uint16_t* scales, uint8_t (*qs)[kQuantBlock / 2]) {
  const uint8_t* in = group + b * kGroupBlockBytes;
  std::memcpy(scales, in, kScalesBytes);
  for (int64_t r = 0; r < kInterleavedRows; ++r)
    for (size_t u = 0; u < kQuads; ++u)
      std::memcpy(qs[r] + u * kQuadBytes, in + kScalesBytes + (u * kInterleavedRows + r) * kQuadBytes, kQuadBytes);
}

void deinterleave_group(Type t, const uint8_t* group, uint8_t* dst, int64_t n) {
  check("deinterleave_group", t, n);
  const int64_t blocks = n / kQuantBlock;
  auto* rows = reinterpret_cast<BlockQ4_0*>(dst);
  for (int64_t b = 0; b < blocks; ++b) {
    uint16_t scales[kInterleavedRows];
    uint8_t qs[kInterleavedRows][kQuantBlock / 2];
    deinterleave_block(group, b, scales, qs);
    for (int64_t r = 0; r < kInterleavedRows; ++r) {
      BlockQ4_0& out = rows[r * blocks + b];
      out.d = scales[r];
      std::memcpy(out.qs, qs[r], sizeof out.qs);
    }
  }
}

}  // namespace ggl
