#include "ggml-like/quant/interleaved.h"

#include <cstring>

#include "ggml-like/core/error.h"
#include "ggml-like/quant/legacy.h"

namespace ggl {
namespace {

constexpr size_t kScalesBytes = kInterleavedRows * sizeof(uint16_t);
constexpr size_t kQuadBytes = 4;  // one row's bytes per 32-bit lane
static_assert(sizeof(BlockQ4_0) == sizeof(uint16_t) + kQuantBlock / 2);
static_assert(sizeof(BlockQ8_0) == sizeof(uint16_t) + kQuantBlock);

// The quant bytes of one plain block of an interleaved type's file type (after its fp16 scale).
size_t quant_bytes(Type t) { return t == Type::Q8_0_R8 ? kQuantBlock : kQuantBlock / 2; }
size_t plain_block_bytes(Type t) { return sizeof(uint16_t) + quant_bytes(t); }
size_t group_block_bytes(Type t) { return kInterleavedRows * plain_block_bytes(t); }

void check(const char* what, Type t, int64_t n) {
  if (!is_interleaved(t)) fail("{}: {} is not an interleaved type", what, type_name(t));
  if (n <= 0 || n % kQuantBlock != 0) fail("{}: rows of {} elements are not whole blocks", what, n);
}

}  // namespace

std::optional<Type> interleaved_type(Type t, int64_t n_rows) {
  if (n_rows <= 0 || n_rows % kInterleavedRows != 0) return std::nullopt;
  if (t == Type::Q4_0) return Type::Q4_0_R8;
  if (t == Type::Q8_0) return Type::Q8_0_R8;
  return std::nullopt;
}

bool is_interleaved(Type t) { return t == Type::Q4_0_R8 || t == Type::Q8_0_R8; }

Type plain_type(Type t) {
  if (t == Type::Q4_0_R8) return Type::Q4_0;
  if (t == Type::Q8_0_R8) return Type::Q8_0;
  return t;
}

void interleave_rows(Type t, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t n) {
  check("interleave_rows", t, n);
  if (rows % kInterleavedRows != 0) fail("interleave_rows: {} rows are not whole groups of 8", rows);
  const int64_t blocks = n / kQuantBlock;
  const size_t block_bytes = plain_block_bytes(t), quads = quant_bytes(t) / kQuadBytes;
  const size_t row_stride = static_cast<size_t>(blocks) * block_bytes;
  for (int64_t g = 0; g < rows / kInterleavedRows; ++g) {
    const uint8_t* first = src + g * kInterleavedRows * row_stride;
    uint8_t* out = dst + g * kInterleavedRows * row_stride;
    for (int64_t b = 0; b < blocks; ++b, out += group_block_bytes(t))
      for (int64_t r = 0; r < kInterleavedRows; ++r) {
        const uint8_t* block = first + r * row_stride + b * block_bytes;  // fp16 scale, quants
        std::memcpy(out + r * sizeof(uint16_t), block, sizeof(uint16_t));
        for (size_t u = 0; u < quads; ++u)
          std::memcpy(out + kScalesBytes + (u * kInterleavedRows + r) * kQuadBytes,
                      block + sizeof(uint16_t) + u * kQuadBytes, kQuadBytes);
      }
  }
}

void deinterleave_block(Type t, const uint8_t* group, int64_t b, uint16_t* scales,
                        uint8_t (*qs)[kMaxInterleavedQuantBytes]) {
  const uint8_t* in = group + b * group_block_bytes(t);
  std::memcpy(scales, in, kScalesBytes);
  for (int64_t r = 0; r < kInterleavedRows; ++r)
    for (size_t u = 0; u < quant_bytes(t) / kQuadBytes; ++u)
      std::memcpy(qs[r] + u * kQuadBytes, in + kScalesBytes + (u * kInterleavedRows + r) * kQuadBytes, kQuadBytes);
}

void deinterleave_group(Type t, const uint8_t* group, uint8_t* dst, int64_t n) {
  check("deinterleave_group", t, n);
  const int64_t blocks = n / kQuantBlock;
  const size_t block_bytes = plain_block_bytes(t);
  for (int64_t b = 0; b < blocks; ++b) {
    uint16_t scales[kInterleavedRows];
    uint8_t qs[kInterleavedRows][kMaxInterleavedQuantBytes];
    deinterleave_block(t, group, b, scales, qs);
    for (int64_t r = 0; r < kInterleavedRows; ++r) {
      uint8_t* out = dst + (r * blocks + b) * block_bytes;
      std::memcpy(out, &scales[r], sizeof(uint16_t));
      std::memcpy(out + sizeof(uint16_t), qs[r], quant_bytes(t));
    }
  }
}

}  // namespace ggl
