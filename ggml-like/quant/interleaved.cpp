#include "ggml-like/quant/interleaved.h"

#include <cstring>

#include "ggml-like/core/error.h"
#include "ggml-like/quant/kquants.h"
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
  const int64_t block = traits(t).block_size;
  if (n <= 0 || n % block != 0) fail("{}: rows of {} elements are not whole blocks of {}", what, n, block);
}

// ---- Q6_K_R8 (interleaved.h) ----
using q6_k_r8::kGroupBytes, q6_k_r8::kQuants, q6_k_r8::kSubBlockBytes;
static_assert(kGroupBytes == kInterleavedRows * sizeof(BlockQ6_K));

// Element j's 6-bit quant of a Q6_K block (kquants.h's layout), and setting it.
int q6_quant(const BlockQ6_K& b, int j) {
  const int h = j / 128, k = (j % 128) / 32, l = j % 32;
  const int low = (b.ql[64 * h + l + 32 * (k % 2)] >> (4 * (k / 2))) & 0x0f;
  return low | (((b.qh[32 * h + l] >> (2 * k)) & 3) << 4);
}
void set_q6_quant(BlockQ6_K& b, int j, int q) {
  const int h = j / 128, k = (j % 128) / 32, l = j % 32;
  uint8_t& low = b.ql[64 * h + l + 32 * (k % 2)];
  low = static_cast<uint8_t>((low & ~(0x0f << (4 * (k / 2)))) | ((q & 0x0f) << (4 * (k / 2))));
  uint8_t& high = b.qh[32 * h + l];
  high = static_cast<uint8_t>((high & ~(3 << (2 * k))) | (((q >> 4) & 3) << (2 * k)));
}

// Where sub-block c's element e (0..31) of row r sits in a group block: the byte holding its low
// 4 bits (and at which shift) and the byte holding its top 2 bits (and at which shift).
struct Q6Place {
  size_t low, high;
  int low_shift, high_shift;
};
Q6Place q6_place(int c, int r, int e) {
  const int half = e / 16, j = e % 4, u = (e % 16) / 4;
  const size_t sub = kQuants + c * kSubBlockBytes;
  return {sub + (u * kInterleavedRows + r) * kQuadBytes + j, sub + ((4 + half) * kInterleavedRows + r) * kQuadBytes + j,
          4 * half, 2 * u};
}

void interleave_q6_k(const BlockQ6_K* const* rows, uint8_t* out) {
  std::memset(out, 0, kGroupBytes);
  for (int r = 0; r < kInterleavedRows; ++r) {
    const BlockQ6_K& b = *rows[r];
    std::memcpy(out + 2 * r, &b.d, sizeof b.d);
    for (int j = 0; j < 16; ++j) out[q6_k_r8::kScales + j * kInterleavedRows + r] = static_cast<uint8_t>(b.scales[j]);
    for (int c = 0; c < 8; ++c)
      for (int e = 0; e < 32; ++e) {
        const int q = q6_quant(b, 32 * c + e);
        const Q6Place p = q6_place(c, r, e);
        out[p.low] = static_cast<uint8_t>(out[p.low] | ((q & 0x0f) << p.low_shift));
        out[p.high] = static_cast<uint8_t>(out[p.high] | ((q >> 4) << p.high_shift));
      }
  }
}

void deinterleave_q6_k(const uint8_t* in, BlockQ6_K* const* rows) {
  for (int r = 0; r < kInterleavedRows; ++r) {
    BlockQ6_K& b = *rows[r];
    std::memset(&b, 0, sizeof b);
    std::memcpy(&b.d, in + 2 * r, sizeof b.d);
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(in[q6_k_r8::kScales + j * kInterleavedRows + r]);
    for (int c = 0; c < 8; ++c)
      for (int e = 0; e < 32; ++e) {
        const Q6Place p = q6_place(c, r, e);
        set_q6_quant(b, 32 * c + e, ((in[p.low] >> p.low_shift) & 0x0f) | (((in[p.high] >> p.high_shift) & 3) << 4));
      }
  }
}

}  // namespace

std::optional<Type> interleaved_type(Type t, int64_t n_rows) {
  if (n_rows <= 0 || n_rows % kInterleavedRows != 0) return std::nullopt;
  if (t == Type::Q4_0) return Type::Q4_0_R8;
  if (t == Type::Q8_0) return Type::Q8_0_R8;
  if (t == Type::Q6_K) return Type::Q6_K_R8;
  return std::nullopt;
}

bool is_interleaved(Type t) { return t == Type::Q4_0_R8 || t == Type::Q8_0_R8 || t == Type::Q6_K_R8; }

Type plain_type(Type t) {
  if (t == Type::Q4_0_R8) return Type::Q4_0;
  if (t == Type::Q8_0_R8) return Type::Q8_0;
  if (t == Type::Q6_K_R8) return Type::Q6_K;
  return t;
}

void interleave_rows(Type t, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t n) {
  check("interleave_rows", t, n);
  if (rows % kInterleavedRows != 0) fail("interleave_rows: {} rows are not whole groups of 8", rows);
  if (t == Type::Q6_K_R8) {
    const int64_t blocks = n / kSuperBlock;
    const auto* plain = reinterpret_cast<const BlockQ6_K*>(src);
    for (int64_t g = 0; g < rows / kInterleavedRows; ++g)
      for (int64_t b = 0; b < blocks; ++b) {
        const BlockQ6_K* group[kInterleavedRows];
        for (int64_t r = 0; r < kInterleavedRows; ++r) group[r] = plain + (g * kInterleavedRows + r) * blocks + b;
        interleave_q6_k(group, dst + (g * blocks + b) * kGroupBytes);
      }
    return;
  }
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
  if (t == Type::Q6_K_R8) {
    const int64_t blocks = n / kSuperBlock;
    auto* plain = reinterpret_cast<BlockQ6_K*>(dst);
    for (int64_t b = 0; b < blocks; ++b) {
      BlockQ6_K* rows[kInterleavedRows];
      for (int64_t r = 0; r < kInterleavedRows; ++r) rows[r] = plain + r * blocks + b;
      deinterleave_q6_k(group + b * kGroupBytes, rows);
    }
    return;
  }
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
