// Decoding of every weight type's blocks, written once for the CUDA kernels and the host
// (core/host_device.h), so the default build's test (tests/ggml-like/cuda/test_cuda_block_decode.cpp) checks
// against the reference dequantizers exactly the code the kernels run: the group decoders, the
// walk of a row in groups, and a lane's share of a dot product. No CUDA header is needed on the host side.
//
// The unit is a group of 8 consecutive values (kGroup): every block type's block is a whole
// number of groups (4 for the 32-value blocks, 32 for the 256-value super-blocks), and the plain
// types (F32, F16, BF16) are read as "blocks" of one group, so their rows must be a multiple of 8.
// Loads are byte loads assembled little-endian: GGUF blocks (34, 18, 110, ... bytes) are not
// aligned to their fields' sizes in general. Only F32 reads whole floats (4-byte aligned data).
// Formulas follow ggml-like/quant/*.cpp's dequantizers term by term.
#pragma once
#include <cstdint>
#include <cstring>

#include "ggml-like/core/types.h"
#include "ggml-like/core/host_device.h"
#include "ggml-like/core/weight_type_switch.h"
#include "ggml-like/quant/iq_grids.h"
#include "ggml-like/quant/iq3_grids.h"

namespace ggl::blocks {

inline constexpr int kGroup = 8;

GGL_HD uint32_t load_u16(const uint8_t* p) { return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8); }
GGL_HD uint32_t load_u32(const uint8_t* p) { return load_u16(p) | (load_u16(p + 2) << 16); }

GGL_HD float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// IEEE half to float, exact (subnormals, infinities and NaN included).
GGL_HD float half_to_float(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return bits_to_float(sign | 0x7f800000u | (mantissa << 13));
  return bits_to_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}
GGL_HD float bf16_to_float(uint32_t b) { return bits_to_float(b << 16); }
GGL_HD float load_half(const uint8_t* p) { return half_to_float(load_u16(p)); }

// IQ4's 16 levels (kIq4Values) packed into two words, so device code needs no table in memory.
GGL_HD int iq4_level(int q) {
  const uint64_t low = 0xF6EADDCFBFAD9881ull, high = 0x7159453526190D01ull;
  return static_cast<int8_t>(static_cast<uint8_t>(((q < 8 ? low : high) >> (8 * (q & 7))) & 0xff));
}

// Nibble of value j (0..31) in a 32-value block whose byte i holds values i and i + 16
// (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, an IQ4_XS sub-block).
GGL_HD int nibble32(const uint8_t* qs, int j) { return (qs[j & 15] >> (4 * (j >> 4))) & 0x0f; }

// Decoder<T>, one specialization per weight type T: kValues values in kBytes bytes per block,
// group(block, g, v) writes values 8g .. 8g+7 of the block to v.
template <Type T>
struct Decoder;

template <>
struct Decoder<Type::F32> {
  static constexpr int kValues = kGroup, kBytes = 4 * kGroup;
  static GGL_HD void group(const uint8_t* b, int, float* v) {
    for (int j = 0; j < kGroup; ++j) {
#if defined(__CUDA_ARCH__)
      v[j] = reinterpret_cast<const float*>(b)[j];
#else
      std::memcpy(&v[j], b + 4 * j, sizeof(float));
#endif
    }
  }
};
template <>
struct Decoder<Type::F16> {
  static constexpr int kValues = kGroup, kBytes = 2 * kGroup;
  static GGL_HD void group(const uint8_t* b, int, float* v) {
    for (int j = 0; j < kGroup; ++j) v[j] = load_half(b + 2 * j);
  }
};
template <>
struct Decoder<Type::BF16> {
  static constexpr int kValues = kGroup, kBytes = 2 * kGroup;
  static GGL_HD void group(const uint8_t* b, int, float* v) {
    for (int j = 0; j < kGroup; ++j) v[j] = bf16_to_float(load_u16(b + 2 * j));
  }
};

// Q8_0: d, 32 int8.
template <>
struct Decoder<Type::Q8_0> {
  static constexpr int kValues = 32, kBytes = 34;
  static GGL_HD void group(const uint8_t* b, int g, float* v) {
    const float d = load_half(b);
    for (int j = 0; j < kGroup; ++j) v[j] = d * static_cast<float>(static_cast<int8_t>(b[2 + 8 * g + j]));
  }
};
// Q4_0: d, 16 bytes of nibbles; d * (q - 8).
template <>
struct Decoder<Type::Q4_0> {
  static constexpr int kValues = 32, kBytes = 18;
  static GGL_HD void group(const uint8_t* b, int g, float* v) {
    const float d = load_half(b);
    for (int j = 0; j < kGroup; ++j) v[j] = d * static_cast<float>(nibble32(b + 2, 8 * g + j) - 8);
  }
};
// Q4_1: d, m, nibbles; d * q + m.
template <>
struct Decoder<Type::Q4_1> {
  static constexpr int kValues = 32, kBytes = 20;
  static GGL_HD void group(const uint8_t* b, int g, float* v) {
    const float d = load_half(b), m = load_half(b + 2);
    for (int j = 0; j < kGroup; ++j) v[j] = d * static_cast<float>(nibble32(b + 4, 8 * g + j)) + m;
  }
};
// Q5_0: d, qh (bit e is value e's fifth bit), nibbles; (q - 16) * d.
template <>
struct Decoder<Type::Q5_0> {
  static constexpr int kValues = 32, kBytes = 22;
  static GGL_HD void group(const uint8_t* b, int g, float* v) {
    const float d = load_half(b);
    const uint32_t qh = load_u32(b + 2);
    for (int j = 0; j < kGroup; ++j) {
      const int e = 8 * g + j;
      const int q = nibble32(b + 6, e) | static_cast<int>(((qh >> e) & 1) << 4);
      v[j] = static_cast<float>(q - 16) * d;
    }
  }
};
// Q5_1: d, m, qh, nibbles; q * d + m.
template <>
struct Decoder<Type::Q5_1> {
  static constexpr int kValues = 32, kBytes = 24;
  static GGL_HD void group(const uint8_t* b, int g, float* v) {
    const float d = load_half(b), m = load_half(b + 2);
    const uint32_t qh = load_u32(b + 4);
    for (int j = 0; j < kGroup; ++j) {
      const int e = 8 * g + j;
      const int q = nibble32(b + 8, e) | static_cast<int>(((qh >> e) & 1) << 4);
      v[j] = static_cast<float>(q) * d + m;
    }
  }
};

// The K-quants' value e of a super-block lies in half h = e / 128, quarter k = (e % 128) / 32, at
// l = e % 32; a group never crosses a 16-value sub-block.
// Q2_K: scales[16], qs[64], d, dmin.
template <>
struct Decoder<Type::Q2_K> {
  static constexpr int kValues = 256, kBytes = 84;
  static GGL_HD void group(const uint8_t* b, int g, float* v) {
    const int e = 8 * g, h = e >> 7, k = (e >> 5) & 3, l = e & 31;
    const float d = load_half(b + 80), dmin = load_half(b + 82);
    const uint32_t sc = b[e >> 4];
    const float dl = d * static_cast<float>(sc & 0x0f), ml = dmin * static_cast<float>(sc >> 4);
    const uint8_t* qs = b + 16 + 32 * h + l;
    for (int j = 0; j < kGroup; ++j) v[j] = dl * static_cast<float>((qs[j] >> (2 * k)) & 3) - ml;
  }
};
// Q3_K: hmask[32], qs[64], scales[12] (16 six-bit scales), d.
template <>
struct Decoder<Type::Q3_K> {
  static constexpr int kValues = 256, kBytes = 110;
  static GGL_HD void group(const uint8_t* b, int g, float* v) {
    const int e = 8 * g, h = e >> 7, k = (e >> 5) & 3, l = e & 31, s = e >> 4;
    const uint8_t* scales = b + 96;
    const int low4 = s < 8 ? scales[s] & 0x0f : scales[s - 8] >> 4;
    const int high2 = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
    const float dl = load_half(b + 108) * static_cast<float>((low4 | (high2 << 4)) - 32);
    const uint8_t* qs = b + 32 + 32 * h + l;
    const uint8_t* hmask = b + l;
    for (int j = 0; j < kGroup; ++j) {
      const int low = (qs[j] >> (2 * k)) & 3, high = (hmask[j] >> (e >> 5)) & 1;
      v[j] = dl * static_cast<float>(low - (high ? 0 : 4));
    }
  }
};
// Sub-block s's 6-bit scale and min in a Q4_K / Q5_K scales array (ggml's get_scale_min_k4).
GGL_HD void scale_min_k4(int s, const uint8_t* q, int& sc, int& m) {
  if (s < 4) {
    sc = q[s] & 63;
    m = q[s + 4] & 63;
  } else {
    sc = (q[s + 4] & 0x0f) | ((q[s - 4] >> 6) << 4);
    m = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
  }
}
// Q4_K (fifth = false): d, dmin, scales[12], qs[128]; Q5_K (fifth = true): qh[32] before qs.
template <bool kFifth>
struct DecodeQ45_K {
  static constexpr int kValues = 256, kBytes = kFifth ? 176 : 144;
  static GGL_HD void group(const uint8_t* b, int g, float* v) {
    const int e = 8 * g, s = e >> 5, l = e & 31;
    int sc, m;
    scale_min_k4(s, b + 4, sc, m);
    const float dl = load_half(b) * static_cast<float>(sc), ml = load_half(b + 2) * static_cast<float>(m);
    const uint8_t* qs = b + (kFifth ? 48 : 16) + 32 * (s / 2) + l;
    const uint8_t* qh = b + 16 + l;
    for (int j = 0; j < kGroup; ++j) {
      int q = (qs[j] >> (4 * (s % 2))) & 0x0f;
      if (kFifth) q += ((qh[j] >> s) & 1) << 4;
      v[j] = dl * static_cast<float>(q) - ml;
    }
  }
};
template <>
struct Decoder<Type::Q4_K> : DecodeQ45_K<false> {};
template <>
struct Decoder<Type::Q5_K> : DecodeQ45_K<true> {};
// Q6_K: ql[128], qh[64], int8 scales[16], d.
template <>
struct Decoder<Type::Q6_K> {
  static constexpr int kValues = 256, kBytes = 210;
  static GGL_HD void group(const uint8_t* b, int g, float* v) {
    const int e = 8 * g, h = e >> 7, k = (e >> 5) & 3, l = e & 31;
    const float dl = load_half(b + 208) * static_cast<float>(static_cast<int8_t>(b[192 + (e >> 4)]));
    const uint8_t* ql = b + 64 * h + l + 32 * (k % 2);
    const uint8_t* qh = b + 128 + 32 * h + l;
    for (int j = 0; j < kGroup; ++j) {
      const int low = (ql[j] >> (4 * (k / 2))) & 0x0f, high = (qh[j] >> (2 * k)) & 3;
      v[j] = dl * static_cast<float>((low | (high << 4)) - 32);
    }
  }
};
// IQ4_NL: d, nibbles indexing the 16 levels.
template <>
struct Decoder<Type::IQ4_NL> {
  static constexpr int kValues = 32, kBytes = 18;
  static GGL_HD void group(const uint8_t* b, int g, float* v) {
    const float d = load_half(b);
    for (int j = 0; j < kGroup; ++j) v[j] = d * static_cast<float>(iq4_level(nibble32(b + 2, 8 * g + j)));
  }
};
// IQ4_XS: d, scales_h (2 bits per sub-block), scales_l[4] (4 bits), qs[128] (16 per sub-block).
template <>
struct Decoder<Type::IQ4_XS> {
  static constexpr int kValues = 256, kBytes = 136;
  static GGL_HD void group(const uint8_t* b, int g, float* v) {
    const int e = 8 * g, s = e >> 5;
    const int ls = ((b[4 + s / 2] >> (4 * (s % 2))) & 0x0f) | static_cast<int>(((load_u16(b + 2) >> (2 * s)) & 3) << 4);
    const float dl = load_half(b) * static_cast<float>(ls - 32);
    const uint8_t* qs = b + 8 + 16 * s;
    for (int j = 0; j < kGroup; ++j) v[j] = dl * static_cast<float>(iq4_level(nibble32(qs, (e & 31) + j)));
  }
};

// The grid i-quants: a group of 8 is one grid point (iq_grids.h). The device reads the grids from
// copies in its own memory, initialized at compile time.
#if defined(__CUDACC__)
static __device__ const IqGrid<256> kIq2xxsGridDevice = kIq2xxsGrid;
static __device__ const IqGrid<512> kIq2xsGridDevice = kIq2xsGrid;
static __device__ const IqGrid<1024> kIq2sGridDevice = kIq2sGrid;
static __device__ const IqGrid<2048> kIq1sGridDevice = kIq1sGrid;
#if defined(__CUDA_ARCH__)
#define GGL_IQ_GRID(name) name##Device
#endif
#endif
#if !defined(GGL_IQ_GRID)
#define GGL_IQ_GRID(name) name
#endif
GGL_HD uint64_t iq2xxs_point(uint32_t k) { return GGL_IQ_GRID(kIq2xxsGrid).v[k]; }
GGL_HD uint64_t iq2xs_point(uint32_t k) { return GGL_IQ_GRID(kIq2xsGrid).v[k]; }
GGL_HD uint64_t iq2s_point(uint32_t k) { return GGL_IQ_GRID(kIq2sGrid).v[k]; }
GGL_HD uint64_t iq1s_point(uint32_t k) { return GGL_IQ_GRID(kIq1sGrid).v[k]; }
#undef GGL_IQ_GRID

// IQ2: value j = scale * level j of the point, negated where sign bit j is set.
GGL_HD void iq2_group(uint64_t point, uint32_t signs, float scale, float* v) {
  for (int j = 0; j < kGroup; ++j)
    v[j] = scale * static_cast<float>((point >> (8 * j)) & 0xff) * ((signs >> j) & 1 ? -1.0f : 1.0f);
}
GGL_HD float iq2_scale(float d, uint32_t s) { return d * (0.5f + static_cast<float>(s)) * 0.25f; }
// IQ1: value j = scale * (coordinate j of the point + delta).
GGL_HD void iq1_group(uint64_t point, float scale, float delta, float* v) {
  for (int j = 0; j < kGroup; ++j)
    v[j] = scale * (static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>((point >> (8 * j)) & 0xff))) + delta);
}

// IQ2_XXS: d, then per 32 values two words: 4 grid indices (bytes); 4 x 7 sign bits and the scale.
template <>
struct Decoder<Type::IQ2_XXS> {
  static constexpr int kValues = 256, kBytes = 66;
  static GGL_HD void group(const uint8_t* b, int g, float* v) {
    const int sub = g >> 2, l = g & 3;
    const uint32_t aux = load_u32(b + 2 + 8 * sub + 4);
    iq2_group(iq2xxs_point(b[2 + 8 * sub + l]), iq_even_signs(aux >> (7 * l)), iq2_scale(load_half(b), aux >> 28), v);
  }
};
// IQ2_XS: d, qs[32] (9-bit grid index | 7 sign bits << 9), scales[8] (a nibble per 16 values).
template <>
struct Decoder<Type::IQ2_XS> {
  static constexpr int kValues = 256, kBytes = 74;
  static GGL_HD void group(const uint8_t* b, int g, float* v) {
    const uint32_t q = load_u16(b + 2 + 2 * g);
    const uint32_t s = (b[66 + (g >> 2)] >> (4 * ((g & 3) >> 1))) & 0x0f;
    iq2_group(iq2xs_point(q & 511), iq_even_signs(q >> 9), iq2_scale(load_half(b), s), v);
  }
};
// IQ2_S: d, qs[32] (grid index low bits), signs[32], qh[8] (index bits 8..9), scales[8].
template <>
struct Decoder<Type::IQ2_S> {
  static constexpr int kValues = 256, kBytes = 82;
  static GGL_HD void group(const uint8_t* b, int g, float* v) {
    const int sub = g >> 2, l = g & 3;
    const uint32_t index = b[2 + g] | ((static_cast<uint32_t>(b[66 + sub]) << (8 - 2 * l)) & 0x300);
    const uint32_t s = (b[74 + sub] >> (4 * (l >> 1))) & 0x0f;
    iq2_group(iq2s_point(index), b[34 + g], iq2_scale(load_half(b), s), v);
  }
};
// IQ1_S: d, qs[32] (grid index low bits), qh[8] words (3 index bits per group, scale, shift sign).
template <>
struct Decoder<Type::IQ1_S> {
  static constexpr int kValues = 256, kBytes = 50;
  static GGL_HD void group(const uint8_t* b, int g, float* v) {
    const int sub = g >> 2, l = g & 3;
    const uint32_t qh = load_u16(b + 34 + 2 * sub);
    const float dl = load_half(b) * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
    iq1_group(iq1s_point(b[2 + g] | (((qh >> (3 * l)) & 7) << 8)), dl, qh & 0x8000 ? -kIq1Delta : kIq1Delta, v);
  }
};
// IQ1_M: qs[32], qh[16] (3 index bits and a shift sign per group), scales[8] (four words: 3-bit
// scales per 16 values, the fp16 super-block scale in their top nibbles).
template <>
struct Decoder<Type::IQ1_M> {
  static constexpr int kValues = 256, kBytes = 56;
  static GGL_HD void group(const uint8_t* b, int g, float* v) {
    const int sub = g >> 2, l = g & 3;
    const uint8_t* sc = b + 48;
    const uint32_t bits = (load_u16(sc) >> 12) | ((load_u16(sc + 2) >> 8) & 0x00f0) |
                          ((load_u16(sc + 4) >> 4) & 0x0f00) | (load_u16(sc + 6) & 0xf000);
    const uint32_t word = load_u16(sc + 2 * (sub >> 1));
    const float dl = half_to_float(bits) * static_cast<float>(2 * ((word >> (6 * (sub & 1) + 3 * (l >> 1))) & 7) + 1);
    const uint32_t qh = b[32 + 2 * sub + (l >> 1)] >> (4 * (l & 1));
    iq1_group(iq1s_point(b[g] | ((qh & 7) << 8)), dl, qh & 8 ? -kIq1Delta : kIq1Delta, v);
  }
};

// The IQ3 grids' codes in device memory (the same list as the host's kIq3XxsGrid / kIq3SGrid).
#if defined(__CUDACC__)
static __device__ const uint16_t kIq3XxsGridDevice[kIq3XxsGridPoints] = {GGL_IQ3_XXS_GRID_CODES};
static __device__ const uint16_t kIq3SGridDevice[kIq3SGridPoints] = {GGL_IQ3_S_GRID_CODES};
#endif
GGL_HD uint32_t iq3_xxs_code(int p) {
#if defined(__CUDA_ARCH__)
  return kIq3XxsGridDevice[p];
#else
  return kIq3XxsGrid[p];
#endif
}
GGL_HD uint32_t iq3_s_code(int p) {
#if defined(__CUDA_ARCH__)
  return kIq3SGridDevice[p];
#else
  return kIq3SGrid[p];
#endif
}
// Group g of an IQ3 super-block is points 2 (g % 4) and 2 (g % 4) + 1 of sub-block g / 4.
// IQ3_XXS: d, qs[64] (8 points per sub-block), then per sub-block a word of 4 x 7 sign bits and a
// 4-bit scale.
template <>
struct Decoder<Type::IQ3_XXS> {
  static constexpr int kValues = 256, kBytes = 98;
  static GGL_HD void group(const uint8_t* b, int g, float* v) {
    const int s = g >> 2, l = g & 3;
    const uint32_t word = load_u32(b + 2 + 64 + 4 * s);
    const float db = load_half(b) * (0.5f + static_cast<float>(word >> 28)) * 0.5f;
    const uint32_t signs = iq_even_signs(word >> (7 * l));
    for (int j = 0; j < kGroup; ++j) {
      const uint32_t code = iq3_xxs_code(b[2 + 8 * s + 2 * l + j / 4]);
      const float m = db * static_cast<float>(iq3_xxs_value(iq3_level(code, j & 3)));
      v[j] = (signs >> j) & 1 ? -m : m;
    }
  }
};
// IQ3_S: d, qs[64] (low 8 bits of the points), qh[8] (their ninth bits), signs[32], scales[4].
template <>
struct Decoder<Type::IQ3_S> {
  static constexpr int kValues = 256, kBytes = 110;
  static GGL_HD void group(const uint8_t* b, int g, float* v) {
    const int s = g >> 2, l = g & 3;
    const float db = load_half(b) * static_cast<float>(1 + 2 * ((b[106 + s / 2] >> (4 * (s % 2))) & 0x0f));
    const uint32_t signs = b[74 + 4 * s + l];
    for (int j = 0; j < kGroup; ++j) {
      const int k = 2 * l + j / 4;
      const uint32_t code = iq3_s_code(b[2 + 8 * s + k] | (((b[66 + s] >> k) & 1) << 8));
      const float m = db * static_cast<float>(iq3_s_value(iq3_level(code, j & 3)));
      v[j] = (signs >> j) & 1 ? -m : m;
    }
  }
};

// Calls f(Decoder<t>{}) and returns true, or returns false where t has no decoder.
template <class F>
bool with_decoder(Type t, F&& f) {
  return with_weight_type(t, [&](auto type) { f(Decoder<decltype(type)::value>{}); });
}

// Values per block of type t's decoder (0 where it has none): rows must be a multiple of it.
inline int decoder_values(Type t) {
  int values = 0;
  with_decoder(t, [&](auto d) { values = decltype(d)::kValues; });
  return values;
}

// Group gi of a row: its block and the group's index within it.
template <class D>
GGL_HD const uint8_t* group_block(const uint8_t* row, int64_t gi, int& g) {
  constexpr int kGroups = D::kValues / kGroup;
  g = static_cast<int>(gi % kGroups);
  return row + (gi / kGroups) * D::kBytes;
}

template <class D>
GGL_HD void decode_group(const uint8_t* row, int64_t gi, float* v) {
  int g;
  const uint8_t* block = group_block<D>(row, gi, g);
  D::group(block, g, v);
}

// One lane's share of the dot products of a weight row of n values with m <= kCols activation
// columns (xs[c], f32): groups lane, lane + lanes, ...; acc[c] += its partial sums. The mat-vec
// kernel runs it with lanes = 32 and sums acc over the warp.
template <class D, int kCols>
GGL_HD void row_dot_lane(const uint8_t* row, int64_t n, const float* const* xs, int m, int lane, int lanes,
                         float* acc) {
  const int64_t groups = n / kGroup;
  for (int64_t gi = lane; gi < groups; gi += lanes) {
    float v[kGroup];
    decode_group<D>(row, gi, v);
    GGL_UNROLL
    for (int c = 0; c < kCols; ++c) {
      if (c >= m) break;
      const float* x = xs[c] + gi * kGroup;
      float s = 0.0f;
      GGL_UNROLL
      for (int j = 0; j < kGroup; ++j) s += v[j] * x[j];
      acc[c] += s;
    }
  }
}

}  // namespace ggl::blocks
