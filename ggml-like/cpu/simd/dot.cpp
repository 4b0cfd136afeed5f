// Weight-row x activation dot products. Each chunk of 32 weights (one quant block, or one
// sub-block of a 256-value super-block) is decoded into float vectors once, already scaled, and
// then multiplied into every activation column of the tile, so decoding is shared by the columns
// and each weight row is read once per tile.
// The arithmetic is written once with xsimd; only the widening loads and the 16-entry table lookup
// are per instruction set (cpu/arch/<family>/<set>/dot_lanes.h).

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "ggml-like/core/error.h"
#include "ggml-like/core/fp16.h"
#include "ggml-like/core/weight_type_switch.h"
#include "ggml-like/quant/iq3.h"
#include "ggml-like/quant/quant.h"

#include "ggml-like/cpu/iq_tables.h"

#include "ggml-like/cpu/arch/arm/neon/dot_lanes.h"
#include "ggml-like/cpu/arch/iquant_unpack.h"
#include "ggml-like/cpu/arch/avx512_undefined.h"
#include "ggml-like/cpu/arch/x86/avx2/dot_lanes.h"
#include "ggml-like/cpu/arch/x86/avx512/dot_lanes.h"

#include "ggml-like/cpu/simd/set_declarations.h"

namespace ggl::GGL_ISA {
namespace {

using Floats = xsimd::batch<float>;
using Ints = xsimd::batch<int32_t>;
constexpr int kLanes = static_cast<int>(Floats::size);
constexpr int kChunk = kQuantBlock;
constexpr int kHalf = kChunk / 2;
constexpr int kVecsPerChunk = kChunk / kLanes;
constexpr int kMaxCols = 4;  // activation columns per pass over a weight row
static_assert(Ints::size == Floats::size && kHalf % kLanes == 0);

// ---- Per instruction set (xsimd 8 has none of these), from the set's dot_lanes.h under
// cpu/arch/: widen_u8, widen_s8, widen_u16 (kLanes narrow values at p as int32 lanes), widen_f16
// (kLanes fp16 at p as floats), broadcast_f16(h), and a 16-entry lookup table: table16(entries,
// level) holds level(entries[q]) for q = 0..15 as the set's Table16, computed on vectors so that
// every set rounds the entries identically, and lookup16(table, index) gives table[index & 15]
// per lane. ----

#if defined(GGL_DOT_LANES)
using dot_lanes::broadcast_f16;
using dot_lanes::lookup16;
using dot_lanes::Table16;
using dot_lanes::table16;
using dot_lanes::widen_f16;
using dot_lanes::widen_s8;
using dot_lanes::widen_u16;
using dot_lanes::widen_u8;
#else
// Any other instruction set: through small aligned buffers.
template <typename Batch, typename Narrow>
inline Batch widen(const Narrow* p) {
  alignas(64) typename Batch::value_type wide[kLanes];
  for (int i = 0; i < kLanes; ++i) wide[i] = static_cast<typename Batch::value_type>(p[i]);
  return Batch::load_aligned(wide);
}
inline Ints widen_u8(const uint8_t* p) { return widen<Ints>(p); }
inline Ints widen_s8(const int8_t* p) { return widen<Ints>(p); }
inline Ints widen_u16(const uint16_t* p) { return widen<Ints>(p); }
inline Floats widen_f16(const uint16_t* p) {
  alignas(64) float wide[kLanes];
  fp16_to_f32_row(p, wide, kLanes);
  return Floats::load_aligned(wide);
}
inline Floats broadcast_f16(uint16_t h) { return Floats(fp16_to_f32(h)); }
struct Table16 {
  alignas(64) float entries[16];
};
template <class Level>
inline Table16 table16(const float* entries, Level level) {
  Table16 t;
  for (int q = 0; q < 16; ++q) t.entries[q] = level(Floats(entries[q])).get(0);
  return t;
}
inline Floats lookup16(const Table16& table, Ints index) {
  alignas(64) int32_t idx[kLanes];
  alignas(64) float out[kLanes];
  index.store_aligned(idx);
  for (int i = 0; i < kLanes; ++i) out[i] = table.entries[idx[i] & 15];
  return Floats::load_aligned(out);
}
#endif

// (GGL_AVX512_UNDEFINED_BEGIN / _END, below: GCC 12 misreports the AVX-512 forms of xsimd's
// lane-wise shifts and conversions inlined in the decoders' loops, arch/avx512_undefined.h.)
GGL_AVX512_UNDEFINED_BEGIN
inline Floats to_floats(Ints v) { return xsimd::batch_cast<float>(v); }
GGL_AVX512_UNDEFINED_END

// The 16 values a 4-bit quant can decode to: level(q) for q = 0..15.
inline constexpr float kQ4Levels[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
template <class Level>
inline Table16 q4_table(Level level) {
  return table16(kQ4Levels, level);
}

// The IQ4 levels as floats, for IQ4_NL / IQ4_XS tables (value = scale * level).
inline constexpr auto kIq4Levels = [] {
  std::array<float, 16> v{};
  for (int q = 0; q < 16; ++q) v[q] = static_cast<float>(kIq4Values[q]);
  return v;
}();
inline Table16 iq4_table(Floats scale) {
  return table16(kIq4Levels.data(), [scale](Floats level) { return level * scale; });
}

// Lane masks of bits 0..31: bit e of a 32-bit mask belongs to element e of a block (Q5_0/Q5_1's qh).
alignas(64) inline constexpr auto kElementBits = [] {
  std::array<int32_t, kChunk> v{};
  for (int e = 0; e < kChunk; ++e) v[e] = static_cast<int32_t>(1u << e);
  return v;
}();
// 16 in the lanes of vector p of a block whose element's bit is set in mask (the fifth bit of a Q5 quant).
inline Ints fifth_bits(uint32_t mask, int p) {
  const Ints bits = Ints(static_cast<int32_t>(mask)) & Ints::load_aligned(kElementBits.data() + p * kLanes);
  return xsimd::select(bits != Ints(0), Ints(16), Ints(0));
}

// The quants of vector p of a Q4 block, in the low 4 bits of each lane (higher bits are ignored by
// lookup16). Lanes are elements [p * kLanes, (p + 1) * kLanes): elements below 16 are the low
// nibbles of qs, the rest the high nibbles of the same bytes.
inline Ints nibbles(const uint8_t* qs, int p) {
  const int first = p * kLanes;
  const Ints bytes = widen_u8(qs + first % kHalf);
  GGL_AVX512_UNDEFINED_BEGIN
  return first < kHalf ? bytes : (bytes >> 4);
  GGL_AVX512_UNDEFINED_END
}

// ---- Decoders: Decoder<T> decodes chunk k of a row of weight type T into kVecsPerChunk float
// vectors, scaled. Plain types (not kBlocked) also decode single elements, for rows whose length
// is not a multiple of 32. ----

template <Type T>
struct Decoder;

template <>
struct Decoder<Type::F32> {
  static constexpr bool kBlocked = false;
  static constexpr size_t kChunkBytes = kChunk * sizeof(float);
  static void chunk(const uint8_t* p, Floats* w) {
    const auto* f = reinterpret_cast<const float*>(p);
    for (int v = 0; v < kVecsPerChunk; ++v) w[v] = Floats::load_unaligned(f + v * kLanes);
  }
  static float element(const uint8_t* row, int64_t i) {
    float v;
    std::memcpy(&v, row + i * sizeof(float), sizeof v);
    return v;
  }
};

template <>
struct Decoder<Type::F16> {
  static constexpr bool kBlocked = false;
  static constexpr size_t kChunkBytes = kChunk * sizeof(uint16_t);
  static void chunk(const uint8_t* p, Floats* w) {
    const auto* h = reinterpret_cast<const uint16_t*>(p);
    for (int v = 0; v < kVecsPerChunk; ++v) w[v] = widen_f16(h + v * kLanes);
  }
  static float element(const uint8_t* row, int64_t i) {
    uint16_t h;
    std::memcpy(&h, row + i * sizeof h, sizeof h);
    return fp16_to_f32(h);
  }
};

template <>
struct Decoder<Type::BF16> {
  static constexpr bool kBlocked = false;
  static constexpr size_t kChunkBytes = kChunk * sizeof(uint16_t);
  static void chunk(const uint8_t* p, Floats* w) {
    const auto* b = reinterpret_cast<const uint16_t*>(p);
    GGL_AVX512_UNDEFINED_BEGIN
    for (int v = 0; v < kVecsPerChunk; ++v) w[v] = xsimd::bitwise_cast<Floats>(widen_u16(b + v * kLanes) << 16);
    GGL_AVX512_UNDEFINED_END
  }
  static float element(const uint8_t* row, int64_t i) {
    uint16_t h;
    std::memcpy(&h, row + i * sizeof h, sizeof h);
    return bf16_to_f32(h);
  }
};

template <>
struct Decoder<Type::Q8_0> {
  static constexpr bool kBlocked = true;
  static constexpr size_t kChunkBytes = sizeof(BlockQ8_0);
  static void chunk(const uint8_t* p, Floats* w) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(p);
    const Floats d = broadcast_f16(b->d);
    for (int v = 0; v < kVecsPerChunk; ++v) w[v] = d * to_floats(widen_s8(b->qs + v * kLanes));
  }
};

template <>
struct Decoder<Type::Q4_0> {
  static constexpr bool kBlocked = true;
  static constexpr size_t kChunkBytes = sizeof(BlockQ4_0);
  static void chunk(const uint8_t* p, Floats* w) {
    const auto* b = reinterpret_cast<const BlockQ4_0*>(p);
    const Floats d = broadcast_f16(b->d);
    const auto table = q4_table([d](Floats q) { return (q - Floats(8.0f)) * d; });
    for (int v = 0; v < kVecsPerChunk; ++v) w[v] = lookup16(table, nibbles(b->qs, v));
  }
};

template <>
struct Decoder<Type::Q4_1> {
  static constexpr bool kBlocked = true;
  static constexpr size_t kChunkBytes = sizeof(BlockQ4_1);
  static void chunk(const uint8_t* p, Floats* w) {
    const auto* b = reinterpret_cast<const BlockQ4_1*>(p);
    const Floats d = broadcast_f16(b->d), m = broadcast_f16(b->m);
    const auto table = q4_table([d, m](Floats q) { return xsimd::fma(q, d, m); });
    for (int v = 0; v < kVecsPerChunk; ++v) w[v] = lookup16(table, nibbles(b->qs, v));
  }
};

// Super-block decoders (256 values): kChunksPerBlock sub-blocks of 32 per kBlockBytes block;
// chunk(block, sub, w) decodes sub-block sub. Each vector of a chunk lies within one 16-value
// scale group (kLanes <= 16), so it needs one scale.
static_assert(16 % kLanes == 0);
constexpr int kSubBlocks = kSuperBlock / kChunk;

template <>
struct Decoder<Type::Q5_0> {
  static constexpr bool kBlocked = true;
  static constexpr size_t kChunkBytes = sizeof(BlockQ5_0);
  static void chunk(const uint8_t* p, Floats* w) {
    const auto* b = reinterpret_cast<const BlockQ5_0*>(p);
    const Floats d = broadcast_f16(b->d);
    uint32_t qh;
    std::memcpy(&qh, b->qh, sizeof qh);
    for (int v = 0; v < kVecsPerChunk; ++v)
      w[v] = to_floats(((nibbles(b->qs, v) & Ints(15)) | fifth_bits(qh, v)) - Ints(16)) * d;
  }
};

template <>
struct Decoder<Type::Q5_1> {
  static constexpr bool kBlocked = true;
  static constexpr size_t kChunkBytes = sizeof(BlockQ5_1);
  static void chunk(const uint8_t* p, Floats* w) {
    const auto* b = reinterpret_cast<const BlockQ5_1*>(p);
    const Floats d = broadcast_f16(b->d), m = broadcast_f16(b->m);
    uint32_t qh;
    std::memcpy(&qh, b->qh, sizeof qh);
    for (int v = 0; v < kVecsPerChunk; ++v)
      w[v] = xsimd::fma(to_floats((nibbles(b->qs, v) & Ints(15)) | fifth_bits(qh, v)), d, m);
  }
};

template <>
struct Decoder<Type::IQ4_NL> {
  static constexpr bool kBlocked = true;
  static constexpr size_t kChunkBytes = sizeof(BlockIQ4_NL);
  static void chunk(const uint8_t* p, Floats* w) {
    const auto* b = reinterpret_cast<const BlockIQ4_NL*>(p);
    const auto table = iq4_table(broadcast_f16(b->d));
    for (int v = 0; v < kVecsPerChunk; ++v) w[v] = lookup16(table, nibbles(b->qs, v));
  }
};

template <>
struct Decoder<Type::IQ4_XS> {
  static constexpr bool kBlocked = true;
  static constexpr int kChunksPerBlock = kSubBlocks;
  static constexpr size_t kBlockBytes = sizeof(BlockIQ4_XS);
  static void chunk(const uint8_t* p, int sub, Floats* w) {
    const auto& b = *reinterpret_cast<const BlockIQ4_XS*>(p);
    const auto table = iq4_table(Floats(fp16_to_f32(b.d) * static_cast<float>(quant::scale_iq4_xs(b, sub))));
    for (int v = 0; v < kVecsPerChunk; ++v) w[v] = lookup16(table, nibbles(b.qs + sub * kHalf, v));
  }
};

#if GGL_INT16_UNPACK
// The i-quants, where the set has their 16-bit unpacking (arch/iquant_unpack.h): a sub-block's 32
// signed bytes, widened and scaled once (d times its scale per 16 is exact, so each value is the
// dequantizer's).
template <class Kind>
struct IqDecoder {
  static constexpr bool kBlocked = true;
  static constexpr int kChunksPerBlock = kSubBlocks;
  static constexpr size_t kBlockBytes = sizeof(typename Kind::Block);
  static void chunk(const uint8_t* p, int sub, Floats* w) {
    const auto& block = *reinterpret_cast<const typename Kind::Block*>(p);
    const unpack16::IqSubBlock s = Kind::sub_block(block, Kind::signs(block), sub);
    alignas(32) int8_t q[kChunk];
    kquant::store32(q, Kind::values(s));
    const float step = Kind::step(block);
    for (int v = 0; v < kVecsPerChunk; ++v)
      w[v] = to_floats(widen_s8(q + v * kLanes)) * Floats(step * static_cast<float>(s.scale16(v * kLanes / 16)));
  }
};
template <>
struct Decoder<Type::IQ2_XXS> : IqDecoder<unpack16::IQ2_XXS> {};
template <>
struct Decoder<Type::IQ2_XS> : IqDecoder<unpack16::IQ2_XS> {};
template <>
struct Decoder<Type::IQ2_S> : IqDecoder<unpack16::IQ2_S> {};
template <>
struct Decoder<Type::IQ1_S> : IqDecoder<unpack16::IQ1_S> {};
template <>
struct Decoder<Type::IQ1_M> : IqDecoder<unpack16::IQ1_M> {};
template <>
struct Decoder<Type::IQ3_XXS> : IqDecoder<unpack16::IQ3_XXS> {};
template <>
struct Decoder<Type::IQ3_S> : IqDecoder<unpack16::IQ3_S> {};
#else
// The grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M): a sub-block is 4 grid points looked
// up by index, so it is decoded by the quantizer library's sub-block decoder into a buffer and
// loaded from there (the values are the dequantizer's exactly, on every set).
template <class Block, void (*kDecode)(const Block&, int, float*)>
struct GridDecoder {
  static constexpr bool kBlocked = true;
  static constexpr int kChunksPerBlock = kSubBlocks;
  static constexpr size_t kBlockBytes = sizeof(Block);
  static void chunk(const uint8_t* p, int sub, Floats* w) {
    alignas(64) float v[kChunk];
    kDecode(*reinterpret_cast<const Block*>(p), sub, v);
    for (int i = 0; i < kVecsPerChunk; ++i) w[i] = Floats::load_aligned(v + i * kLanes);
  }
};
template <>
struct Decoder<Type::IQ2_XXS> : GridDecoder<BlockIQ2_XXS, quant::decode_iq2_xxs> {};
template <>
struct Decoder<Type::IQ2_XS> : GridDecoder<BlockIQ2_XS, quant::decode_iq2_xs> {};
template <>
struct Decoder<Type::IQ2_S> : GridDecoder<BlockIQ2_S, quant::decode_iq2_s> {};
template <>
struct Decoder<Type::IQ1_S> : GridDecoder<BlockIQ1_S, quant::decode_iq1_s> {};
template <>
struct Decoder<Type::IQ1_M> : GridDecoder<BlockIQ1_M, quant::decode_iq1_m> {};
// IQ3_XXS and IQ3_S: each group of 4 values is a grid point's magnitudes (iq_tables.h: a point's
// 4 values as the bytes of a word) with 4 sign bits; a sub-block's 32 signed magnitudes go
// through bytes, then one scale.
// Group k's 4 values: the point's magnitudes, negated where bit i of signs is set.
inline void signed_group(uint32_t magnitudes, uint32_t signs, int8_t* q) {
  for (int i = 0; i < 4; ++i) {
    const auto m = static_cast<int8_t>((magnitudes >> (8 * i)) & 0xFF);
    q[i] = static_cast<int8_t>((signs >> i) & 1 ? -m : m);
  }
}
inline void scale_bytes(const int8_t* q, float scale, Floats* w) {
  const Floats s(scale);
  for (int v = 0; v < kVecsPerChunk; ++v) w[v] = to_floats(widen_s8(q + v * kLanes)) * s;
}

template <>
struct Decoder<Type::IQ3_XXS> {
  static constexpr bool kBlocked = true;
  static constexpr int kChunksPerBlock = kSubBlocks;
  static constexpr size_t kBlockBytes = sizeof(BlockIQ3_XXS);
  static void chunk(const uint8_t* p, int sub, Floats* w) {
    const auto& b = *reinterpret_cast<const BlockIQ3_XXS*>(p);
    const uint32_t word = quant::scale_signs_iq3_xxs(b, sub);
    alignas(64) int8_t q[kChunk];
    for (int k = 0; k < kChunk / 4; ++k)
      signed_group(iq_tables::kIq3XxsBytes[b.qs[8 * sub + k]], iq_even_signs(word >> (7 * (k / 2))) >> (4 * (k % 2)),
                   q + 4 * k);
    scale_bytes(q, fp16_to_f32(b.d) * (0.5f + static_cast<float>(word >> 28)) * 0.5f, w);
  }
};

template <>
struct Decoder<Type::IQ3_S> {
  static constexpr bool kBlocked = true;
  static constexpr int kChunksPerBlock = kSubBlocks;
  static constexpr size_t kBlockBytes = sizeof(BlockIQ3_S);
  static void chunk(const uint8_t* p, int sub, Floats* w) {
    const auto& b = *reinterpret_cast<const BlockIQ3_S*>(p);
    alignas(64) int8_t q[kChunk];
    for (int k = 0; k < kChunk / 4; ++k)
      signed_group(iq_tables::kIq3SBytes[quant::point_iq3_s(b, sub, k)],
                   static_cast<uint32_t>(b.signs[4 * sub + k / 2]) >> (4 * (k % 2)), q + 4 * k);
    const int ls = (b.scales[sub / 2] >> (4 * (sub % 2))) & 0x0f;
    scale_bytes(q, fp16_to_f32(b.d) * static_cast<float>(1 + 2 * ls), w);
  }
};

#endif

// Q2_K and Q3_K: sub-block s is bits 2 (s % 4) of qs[32 (s / 4) .. + 31].
inline Ints two_bits(const uint8_t* qs, int sub, int v) {
  GGL_AVX512_UNDEFINED_BEGIN
  return (widen_u8(qs + 32 * (sub / 4) + v * kLanes) >> (2 * (sub % 4))) & Ints(3);
  GGL_AVX512_UNDEFINED_END
}
// The 16-value scale group of vector v of sub-block sub.
inline int scale_group(int sub, int v) { return 2 * sub + v * kLanes / 16; }

template <>
struct Decoder<Type::Q2_K> {
  static constexpr bool kBlocked = true;
  static constexpr int kChunksPerBlock = kSubBlocks;
  static constexpr size_t kBlockBytes = sizeof(BlockQ2_K);
  static void chunk(const uint8_t* p, int sub, Floats* w) {
    const auto& b = *reinterpret_cast<const BlockQ2_K*>(p);
    const float d = fp16_to_f32(b.d), dmin = fp16_to_f32(b.dmin);
    for (int v = 0; v < kVecsPerChunk; ++v) {
      const uint8_t sc = b.scales[scale_group(sub, v)];
      const Floats scale(d * static_cast<float>(sc & 0x0f)), min(dmin * static_cast<float>(sc >> 4));
      w[v] = xsimd::fms(to_floats(two_bits(b.qs, sub, v)), scale, min);
    }
  }
};

template <>
struct Decoder<Type::Q3_K> {
  static constexpr bool kBlocked = true;
  static constexpr int kChunksPerBlock = kSubBlocks;
  static constexpr size_t kBlockBytes = sizeof(BlockQ3_K);
  static void chunk(const uint8_t* p, int sub, Floats* w) {
    const auto& b = *reinterpret_cast<const BlockQ3_K*>(p);
    const float d = fp16_to_f32(b.d);
    for (int v = 0; v < kVecsPerChunk; ++v) {
      const Floats scale(d * static_cast<float>(quant::scale_q3_k(scale_group(sub, v), b.scales)));
      // Bit 2 of the quant is bit `sub` of hmask[element]; without it the level is 4 lower.
      GGL_AVX512_UNDEFINED_BEGIN
      const Ints high = (widen_u8(b.hmask + v * kLanes) >> sub) & Ints(1);
      w[v] = to_floats((two_bits(b.qs, sub, v) | (high << 2)) - Ints(4)) * scale;
      GGL_AVX512_UNDEFINED_END
    }
  }
};

// Q4_K and Q5_K: sub-block s is nibble s % 2 of qs[32 (s / 2) .. + 31], with a 6-bit scale and min.
inline Ints k_nibbles(const uint8_t* qs, int sub, int v) {
  GGL_AVX512_UNDEFINED_BEGIN
  return (widen_u8(qs + 32 * (sub / 2) + v * kLanes) >> (4 * (sub % 2))) & Ints(15);
  GGL_AVX512_UNDEFINED_END
}
struct ScaleMin {
  Floats scale, min;
};
inline ScaleMin k4_scale_min(uint16_t d, uint16_t dmin, const uint8_t* scales, int sub) {
  uint8_t sc, m;
  quant::scale_min_k4(sub, scales, &sc, &m);
  return {Floats(fp16_to_f32(d) * static_cast<float>(sc)), Floats(fp16_to_f32(dmin) * static_cast<float>(m))};
}

template <>
struct Decoder<Type::Q4_K> {
  static constexpr bool kBlocked = true;
  static constexpr int kChunksPerBlock = kSubBlocks;
  static constexpr size_t kBlockBytes = sizeof(BlockQ4_K);
  static void chunk(const uint8_t* p, int sub, Floats* w) {
    const auto& b = *reinterpret_cast<const BlockQ4_K*>(p);
    const ScaleMin sm = k4_scale_min(b.d, b.dmin, b.scales, sub);
    for (int v = 0; v < kVecsPerChunk; ++v) w[v] = xsimd::fms(to_floats(k_nibbles(b.qs, sub, v)), sm.scale, sm.min);
  }
};

template <>
struct Decoder<Type::Q5_K> {
  static constexpr bool kBlocked = true;
  static constexpr int kChunksPerBlock = kSubBlocks;
  static constexpr size_t kBlockBytes = sizeof(BlockQ5_K);
  static void chunk(const uint8_t* p, int sub, Floats* w) {
    const auto& b = *reinterpret_cast<const BlockQ5_K*>(p);
    const ScaleMin sm = k4_scale_min(b.d, b.dmin, b.scales, sub);
    for (int v = 0; v < kVecsPerChunk; ++v) {
      GGL_AVX512_UNDEFINED_BEGIN
      const Ints high = (widen_u8(b.qh + v * kLanes) >> sub) & Ints(1);
      w[v] = xsimd::fms(to_floats(k_nibbles(b.qs, sub, v) | (high << 4)), sm.scale, sm.min);
      GGL_AVX512_UNDEFINED_END
    }
  }
};

template <>
struct Decoder<Type::Q6_K> {
  static constexpr bool kBlocked = true;
  static constexpr int kChunksPerBlock = kSubBlocks;
  static constexpr size_t kBlockBytes = sizeof(BlockQ6_K);
  static void chunk(const uint8_t* p, int sub, Floats* w) {
    const auto& b = *reinterpret_cast<const BlockQ6_K*>(p);
    const int half = sub / 4, quarter = sub % 4;
    const uint8_t* ql = b.ql + 64 * half + 32 * (quarter % 2);
    const uint8_t* qh = b.qh + 32 * half;
    const float d = fp16_to_f32(b.d);
    for (int v = 0; v < kVecsPerChunk; ++v) {
      GGL_AVX512_UNDEFINED_BEGIN
      const Ints low = (widen_u8(ql + v * kLanes) >> (4 * (quarter / 2))) & Ints(15);
      const Ints high = (widen_u8(qh + v * kLanes) >> (2 * quarter)) & Ints(3);
      const Floats scale(d * static_cast<float>(b.scales[8 * half + scale_group(quarter, v)]));
      w[v] = to_floats((low | (high << 4)) - Ints(32)) * scale;
      GGL_AVX512_UNDEFINED_END
    }
  }
};

// Chunk k of a row into w: 32-value block types hold chunk after chunk; super-block types hold
// sub-block k % kChunksPerBlock of block k / kChunksPerBlock. prefetch_stride > 0 also prefetches
// the bytes that far ahead (the next tile's rows).
template <class Decode>
inline void decode_chunk(const uint8_t* row, int64_t k, Floats* w, size_t prefetch_stride = 0) {
  if constexpr (requires { Decode::kChunksPerBlock; }) {
    const uint8_t* block = row + (k / Decode::kChunksPerBlock) * Decode::kBlockBytes;
    const int sub = static_cast<int>(k % Decode::kChunksPerBlock);
    if (prefetch_stride)
      __builtin_prefetch(block + sub * Decode::kBlockBytes / Decode::kChunksPerBlock + prefetch_stride);
    Decode::chunk(block, sub, w);
  } else {
    const uint8_t* p = row + k * Decode::kChunkBytes;
    if (prefetch_stride) __builtin_prefetch(p + prefetch_stride);
    Decode::chunk(p, w);
  }
}

// Register tile: out[r][c] = dot(rows[r], xs[c]) for R weight rows and C activation columns. Per
// chunk, the C columns' activations are loaded once and shared by the R rows, and each row's chunk
// is decoded once and shared by the C columns. Every output has one accumulator that sums chunk
// after chunk in the same order whatever R and C are, so batched and single-column results are
// bit-identical; the R * C accumulators are the independent chains that keep the FMA units busy.
template <class Decode, int R, int C>
void dot_tile(const uint8_t* const* rows, int64_t n, const float* const* xs, float (*out)[C],
              size_t prefetch_stride = 0) {
  Floats acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = Floats(0.0f);

  const int64_t chunks = n / kChunk;
  for (int64_t k = 0; k < chunks; ++k) {
    // Decode the R rows' chunks first, then stream each column's activations past them: the
    // activations (possibly from L2 when there are several columns) are loaded once per chunk.
    Floats w[R][kVecsPerChunk];
    // The next tile's rows are prefetched: R short interleaved streams defeat the hardware prefetcher.
    for (int r = 0; r < R; ++r) decode_chunk<Decode>(rows[r], k, w[r], prefetch_stride);
    for (int c = 0; c < C; ++c) {
      for (int v = 0; v < kVecsPerChunk; ++v) {
        const Floats x = Floats::load_unaligned(xs[c] + k * kChunk + v * kLanes);
        for (int r = 0; r < R; ++r) acc[r][c] = xsimd::fma(w[r][v], x, acc[r][c]);
      }
    }
  }

  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      float sum = xsimd::hadd(acc[r][c]);
      if constexpr (!Decode::kBlocked)  // plain types: the elements after the last full chunk
        for (int64_t i = chunks * kChunk; i < n; ++i) sum += Decode::element(rows[r], i) * xs[c][i];
      out[r][c] = sum;
    }
  }
}

// Rows [row_begin, row_end) against C columns: tiles of R rows, then single rows for the rest.
template <class Decode, int R, int C>
void rows_times_columns(const uint8_t* w, size_t row_stride, int64_t n, const float* const* xs, float* const* ys,
                        int64_t row_begin, int64_t row_end) {
  int64_t r0 = row_begin;
  auto run = [&]<int T>() {
    const uint8_t* rows[T];
    float out[T][C];
    for (int r = 0; r < T; ++r) rows[r] = w + static_cast<size_t>(r0 + r) * row_stride;
    dot_tile<Decode, T, C>(rows, n, xs, out, T * row_stride);
    for (int r = 0; r < T; ++r)
      for (int c = 0; c < C; ++c) ys[c][r0 + r] = out[r][c];
    r0 += T;
  };
  // run() advances r0 (clang-tidy's infinite-loop check does not look into the lambda).
  while (r0 + R <= row_end) run.template operator()<R>();  // NOLINT(bugprone-infinite-loop)
  while (r0 < row_end) run.template operator()<1>();       // NOLINT(bugprone-infinite-loop)
}

// Rows are taken a block at a time (about kRowBlockBytes of weights, which stay in L2), and every
// column tile runs over the block before the next: weights come from memory once however many
// columns there are, and a column tile's activations are reused across the block from cache.
constexpr size_t kRowBlockBytes = 128 * 1024;

// Tile shapes fit the register budget (32 vectors with AVX-512): R * C accumulators plus
// R * kVecsPerChunk decoded weights plus the activation vector in use.
template <class Decode>
void matmul_rows(const uint8_t* w, size_t row_stride, int64_t n, const float* x, int64_t x_stride, int64_t n_cols,
                 float* y, int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const int64_t block_rows =
      std::max<int64_t>(8, static_cast<int64_t>(kRowBlockBytes / std::max<size_t>(row_stride, 1)) / 8 * 8);
  const float* xs[kMaxCols];
  float* ys[kMaxCols];
  for (int64_t b0 = row_begin; b0 < row_end; b0 += block_rows) {
    const int64_t b1 = std::min(row_end, b0 + block_rows);
    for (int64_t c0 = 0; c0 < n_cols; c0 += kMaxCols) {
      const int cols = static_cast<int>(std::min<int64_t>(n_cols - c0, kMaxCols));
      for (int c = 0; c < cols; ++c) {
        xs[c] = x + (c0 + c) * x_stride;
        ys[c] = y + (c0 + c) * y_stride;
      }
      switch (cols) {
        case 1: rows_times_columns<Decode, 8, 1>(w, row_stride, n, xs, ys, b0, b1); break;
        case 2: rows_times_columns<Decode, 4, 2>(w, row_stride, n, xs, ys, b0, b1); break;
        case 3: rows_times_columns<Decode, 4, 3>(w, row_stride, n, xs, ys, b0, b1); break;
        default: rows_times_columns<Decode, 4, 4>(w, row_stride, n, xs, ys, b0, b1); break;
      }
    }
  }
}

// A row decoded to floats chunk by chunk, then element by element past the last whole chunk
// (plain types only: block types are whole chunks).
template <class Decode>
void decode_chunks(const uint8_t* row, int64_t n, float* out) {
  const int64_t chunks = n / kChunk;
  for (int64_t k = 0; k < chunks; ++k) {
    Floats w[kVecsPerChunk];
    decode_chunk<Decode>(row, k, w);
    for (int v = 0; v < kVecsPerChunk; ++v) w[v].store_unaligned(out + k * kChunk + v * kLanes);
  }
  if constexpr (!Decode::kBlocked)
    for (int64_t i = chunks * kChunk; i < n; ++i) out[i] = Decode::element(row, i);
}

// y[c][0, n) += sum over k < K of a[c][k] * row k (rows row_stride bytes apart): the transposed
// product. A tile of S chunks of the C outputs stays in registers while every row's chunks at that
// position are decoded into registers and multiplied in, so neither decoded rows nor outputs go
// through memory once per row. Rows are added in order k = 0, 1, ... for every element. S chunks
// at once give S times the independent accumulator chains (one chunk per row measured waiting on
// the FMA latency) and read S times as much of each row per pass over the rows. (Flattened: left a
// call per chunk, the decoding cost as much again.)
template <class Decode, int C, int S>
[[gnu::always_inline]] inline void add_weighted_chunks(const uint8_t* w, size_t row_stride, int64_t K, int64_t k0,
                                                       const float* const* a, float* const* y) {
  Floats acc[C][S][kVecsPerChunk];
  for (int c = 0; c < C; ++c)
    for (int s = 0; s < S; ++s)
      for (int v = 0; v < kVecsPerChunk; ++v)
        acc[c][s][v] = Floats::load_unaligned(y[c] + (k0 + s) * kChunk + v * kLanes);
  for (int64_t r = 0; r < K; ++r) {
    Floats d[S][kVecsPerChunk];
    for (int s = 0; s < S; ++s) decode_chunk<Decode>(w + r * row_stride, k0 + s, d[s]);
    for (int c = 0; c < C; ++c) {
      const Floats f(a[c][r]);
      for (int s = 0; s < S; ++s)
        for (int v = 0; v < kVecsPerChunk; ++v) acc[c][s][v] = xsimd::fma(d[s][v], f, acc[c][s][v]);
    }
  }
  for (int c = 0; c < C; ++c)
    for (int s = 0; s < S; ++s)
      for (int v = 0; v < kVecsPerChunk; ++v) acc[c][s][v].store_unaligned(y[c] + (k0 + s) * kChunk + v * kLanes);
}

template <class Decode, int C>
[[gnu::flatten]] void add_weighted_rows(const uint8_t* w, size_t row_stride, int64_t K, int64_t n,
                                        const float* const* a, float* const* y) {
  // Chunks per tile: 8 accumulator vectors in all, as many as leave registers for the decoding.
  constexpr int kTile = std::max(1, 8 / (C * kVecsPerChunk));
  const int64_t chunks = n / kChunk;
  int64_t k = 0;
  for (; k + kTile <= chunks; k += kTile) add_weighted_chunks<Decode, C, kTile>(w, row_stride, K, k, a, y);
  for (; k < chunks; ++k) add_weighted_chunks<Decode, C, 1>(w, row_stride, K, k, a, y);
  if constexpr (!Decode::kBlocked)  // plain types: the elements after the last full chunk
    for (int64_t i = chunks * kChunk; i < n; ++i)
      for (int64_t r = 0; r < K; ++r)
        for (int c = 0; c < C; ++c) y[c][i] += a[c][r] * Decode::element(w + r * row_stride, i);
}

// Calls f(Decoder<t>{}) with the decoder of weight type t; false for a type without one.
template <class F>
bool with_decoder(Type t, F&& f) {
  return with_weight_type(t, [&](auto type) { f(Decoder<decltype(type)::value>{}); });
}

void check_shape(const char* what, Type t, int64_t n) {
  if (!is_weight_type(t)) fail("{}: unsupported weight type {}", what, type_name(t));
  const int block = traits(t).block_size;
  if (n < 0 || n % block != 0)
    fail("{}: row of {} elements is not a multiple of the {} block size {}", what, n, type_name(t), block);
}

}  // namespace

void matmul(Type t, const void* w, int64_t rows, int64_t n, const float* x, int64_t x_stride, int64_t n_cols, float* y,
            int64_t y_stride, int64_t row_begin, int64_t row_end) {
  check_shape("matmul", t, n);
  if (row_begin < 0 || row_end > rows || row_begin > row_end)
    fail("matmul: row range [{}, {}) outside the {} rows", row_begin, row_end, rows);
  with_decoder(t, [&]<class D>(D) {
    matmul_rows<D>(static_cast<const uint8_t*>(w), row_bytes(t, n), n, x, x_stride, n_cols, y, y_stride, row_begin,
                   row_end);
  });
}

// Called per (query, key) pair by attention, so it skips matmul's tiling and range checks (the
// plain types' rows may have any length).
float dot_row(Type t, const void* w_row, const float* x, int64_t n) {
  if (t != Type::F32 && t != Type::F16 && t != Type::BF16) check_shape("dot_row", t, n);
  const auto* row = static_cast<const uint8_t*>(w_row);
  float out[1][1] = {{0.0f}};
  with_decoder(t, [&]<class D>(D) { dot_tile<D, 1, 1>(&row, n, &x, out); });
  return out[0][0];
}

void decode_row(Type t, const void* w_row, float* out, int64_t n) {
  check_shape("decode_row", t, n);
  with_decoder(t, [&]<class D>(D) { decode_chunks<D>(static_cast<const uint8_t*>(w_row), n, out); });
}

void add_weighted_rows(Type t, const void* w, size_t row_stride, int64_t K, int64_t n, const float* const* a,
                       float* const* y, int n_cols) {
  check_shape("add_weighted_rows", t, n);
  const auto* wb = static_cast<const uint8_t*>(w);
  with_decoder(t, [&]<class D>(D) {
    int c = 0;
    for (; c + 2 <= n_cols; c += 2) add_weighted_rows<D, 2>(wb, row_stride, K, n, a + c, y + c);
    if (c < n_cols) add_weighted_rows<D, 1>(wb, row_stride, K, n, a + c, y + c);
  });
}

}  // namespace ggl::GGL_ISA
