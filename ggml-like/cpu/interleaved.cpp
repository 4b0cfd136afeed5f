#include "ggml-like/cpu/interleaved.h"

#include <cstddef>
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
size_t quant_bytes(Type t) { return t == kQ8_0_R8 ? kQuantBlock : kQuantBlock / 2; }
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

// Sub-block c (elements 32c..32c+31) of a plain Q6_K block (kquants.h): element 32c + l has its
// low 4 bits in ql[64h + 32(k % 2) + l] at bit 4(k / 2) and its top 2 bits in qh[32h + l] at bit
// 2k, h = c / 4, k = c % 4: both runs contiguous in l, so 4 elements are one 32-bit word of each,
// handled as 4 bytes at once (no bits cross a byte below).
struct Q6SubBlock {
  size_t low, high;  // offsets of the ql and qh runs in the block
  int low_shift, high_shift;
};
Q6SubBlock q6_sub_block(int c) {
  const int h = c / 4, k = c % 4;
  return {offsetof(BlockQ6_K, ql) + 64 * h + 32 * (k % 2), offsetof(BlockQ6_K, qh) + 32 * h, 4 * (k / 2), 2 * k};
}
uint32_t load4(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
void or4(uint8_t* p, uint32_t v) {
  v |= load4(p);
  std::memcpy(p, &v, sizeof v);
}
constexpr uint32_t kLow4 = 0x0F0F0F0F, kLow2 = 0x03030303;

// The interleaved sub-block c of a group block, lane r: quad u holds elements 4u.. (low nibbles)
// and 16 + 4u.. (high nibbles); the two top-bit quads the top bits of 4u + j (first) and 16 + 4u + j
// (second) in byte j at bit 2u.
size_t lane(int c, int quad, int r) {
  return kQuants + c * kSubBlockBytes + (quad * kInterleavedRows + r) * kQuadBytes;
}

void interleave_q6_k(const BlockQ6_K* const* rows, uint8_t* out) {
  std::memset(out, 0, kGroupBytes);
  for (int r = 0; r < kInterleavedRows; ++r) {
    const BlockQ6_K& b = *rows[r];
    const auto* block = reinterpret_cast<const uint8_t*>(&b);
    std::memcpy(out + 2 * r, &b.d, sizeof b.d);
    for (int j = 0; j < 16; ++j) out[q6_k_r8::kScales + j * kInterleavedRows + r] = static_cast<uint8_t>(b.scales[j]);
    for (int c = 0; c < 8; ++c) {
      const Q6SubBlock p = q6_sub_block(c);
      for (int half = 0; half < 2; ++half)
        for (int u = 0; u < 4; ++u) {
          const int l = 16 * half + 4 * u;  // 4 elements l..l+3
          const uint32_t low = (load4(block + p.low + l) >> p.low_shift) & kLow4;
          const uint32_t top = (load4(block + p.high + l) >> p.high_shift) & kLow2;
          or4(out + lane(c, u, r), low << (4 * half));
          or4(out + lane(c, 4 + half, r), top << (2 * u));
        }
    }
  }
}

void deinterleave_q6_k(const uint8_t* in, BlockQ6_K* const* rows) {
  for (int r = 0; r < kInterleavedRows; ++r) {
    BlockQ6_K& b = *rows[r];
    auto* block = reinterpret_cast<uint8_t*>(&b);
    std::memset(&b, 0, sizeof b);
    std::memcpy(&b.d, in + 2 * r, sizeof b.d);
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(in[q6_k_r8::kScales + j * kInterleavedRows + r]);
    for (int c = 0; c < 8; ++c) {
      const Q6SubBlock p = q6_sub_block(c);
      for (int half = 0; half < 2; ++half)
        for (int u = 0; u < 4; ++u) {
          const int l = 16 * half + 4 * u;
          const uint32_t low = (load4(in + lane(c, u, r)) >> (4 * half)) & kLow4;
          const uint32_t top = (load4(in + lane(c, 4 + half, r)) >> (2 * u)) & kLow2;
          or4(block + p.low + l, low << p.low_shift);
          or4(block + p.high + l, top << p.high_shift);
        }
    }
  }
}

}  // namespace

std::optional<Type> interleaved_type(Type t, int64_t n_rows) {
  if (n_rows <= 0 || n_rows % kInterleavedRows != 0) return std::nullopt;
  if (t == Type::Q4_0) return kQ4_0_R8;
  if (t == Type::Q8_0) return kQ8_0_R8;
  if (t == Type::Q6_K) return kQ6_K_R8;
  return std::nullopt;
}

bool is_interleaved(Type t) { return t == kQ4_0_R8 || t == kQ8_0_R8 || t == kQ6_K_R8; }

Type plain_type(Type t) {
  if (t == kQ4_0_R8) return Type::Q4_0;
  if (t == kQ8_0_R8) return Type::Q8_0;
  if (t == kQ6_K_R8) return Type::Q6_K;
  return t;
}

void interleave_rows(Type t, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t n) {
  check("interleave_rows", t, n);
  if (rows % kInterleavedRows != 0) fail("interleave_rows: {} rows are not whole groups of 8", rows);
  if (t == kQ6_K_R8) {
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
  if (t == kQ6_K_R8) {
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
