// Each K-quant / IQ4 / Q5 type's quants as bytes, 32 values (a sub-block, or a chunk of a half)
// per vector in element order: the bit layouts of quant/kquants.h, legacy.h and iq4.h, written
// once for every architecture over its 32-byte vector (Bytes) and these byte operations from its
// kquant_bytes.h (arch/x86/: AVX2, arch/arm/: NEON):
//   load32(p); store32(p, v); mask8(v, m): each byte and m; bytes_or(a, b); bytes_sub(v, k): each byte minus k
//                (or minus that byte of a second vector k); negate_where(v, mask): each byte negated
//                where mask's is 0xFF (kept where 0); bytes_of_u64(a, b, c, d): 4 x 8 bytes in order;
//   shr16(v, n), shl16(v, n): shifts of each 16-bit lane (bits cross between a lane's two bytes:
//                every use below masks them off);
//   nibbles_of_16(qs): the 32 nibbles of 16 bytes, element i low in byte i, 16 + i high;
//   bits_to_bytes(bits, value): bit e as value (or 0) in byte e;
//   iq4_lookup(v): each byte 0..15 replaced by that IQ4 level (a signed byte); f16(h).
// Taken by the 16-bit unpacking (arch/kquant_unpack.h) and x86's 8-bit products (kquant_blocks.h).
#pragma once
#if defined(__aarch64__)
#include "ggml-like/cpu/arch/arm/kquant_bytes.h"
#else
#include "ggml-like/cpu/arch/x86/kquant_bytes.h"
#endif
#if GGL_KQUANT_BYTES
#include <cstdint>
#include <cstring>

#include "ggml-like/quant/kquants.h"
#include "ggml-like/quant/legacy.h"

namespace ggl::GGL_ISA::kquant {

inline Bytes low_nibbles(Bytes v) { return mask8(v, 0x0F); }
inline Bytes high_nibbles(Bytes v) { return mask8(shr16(v, 4), 0x0F); }

// Sub-block scales and mins of Q4_K / Q5_K (the 6-bit fields quant::scale_min_k4 reads one by
// one), all 8 at once: sc[0..7], m[0..7].
inline void scales_mins_k4(const uint8_t* q, uint8_t* sc, uint8_t* m) {
  uint32_t a, b, c;
  std::memcpy(&a, q, 4);
  std::memcpy(&b, q + 4, 4);
  std::memcpy(&c, q + 8, 4);
  const uint32_t sc_low = a & 0x3f3f3f3f, m_low = b & 0x3f3f3f3f;
  const uint32_t sc_high = (c & 0x0f0f0f0f) | ((a >> 2) & 0x30303030);
  const uint32_t m_high = ((c >> 4) & 0x0f0f0f0f) | ((b >> 2) & 0x30303030);
  std::memcpy(sc, &sc_low, 4);
  std::memcpy(sc + 4, &sc_high, 4);
  std::memcpy(m, &m_low, 4);
  std::memcpy(m + 4, &m_high, 4);
}

// Quants of 2 bits, element 128 h + 32 k + l in bits 2k..2k+1 of qs[32 h + l] (Q2_K, Q3_K's low bits).
inline void unpack_2bit_half(const uint8_t* qs, int h, Bytes* q) {
  Bytes v = load32(qs + 32 * h);
  for (int k = 0; k < 4; ++k, v = shr16(v, 2)) q[k] = mask8(v, 0x03);
}

// Q4_K / Q5_K: sub-blocks 2g and 2g + 1 (quants 0..15, or 0..31 with the fifth bits). `fifth`
// carries Q5_K's qh from one g to the next (load32(w.qh) before g = 0; bit j of byte l: the fifth
// bit of element 32 j + l).
template <class Block, bool kFifthBit>
inline void q45_k_pair(const Block& w, int g, Bytes& fifth, Bytes* q) {
  const Bytes v = load32(w.qs + 32 * g);
  q[0] = low_nibbles(v);
  q[1] = high_nibbles(v);
  if constexpr (kFifthBit)
    for (int h = 0; h < 2; ++h) {
      q[h] = bytes_or(q[h], mask8(shl16(fifth, 4), 0x10));
      fifth = shr16(fifth, 1);
    }
}

// Q6_K: the four chunks of half h (element 128 h + 32 k + l in chunk k), quants 0..63.
inline void q6_k_half(const BlockQ6_K& w, int h, Bytes* q) {
  const Bytes l0 = load32(w.ql + 64 * h), l1 = load32(w.ql + 64 * h + 32);
  const Bytes low[4] = {low_nibbles(l0), low_nibbles(l1), high_nibbles(l0), high_nibbles(l1)};
  Bytes high = load32(w.qh + 32 * h);
  for (int k = 0; k < 4; ++k, high = shr16(high, 2)) q[k] = bytes_or(low[k], mask8(shl16(high, 4), 0x30));
}

// Q3_K: the four chunks of half h, quants 0..7: Q2_K's two bits plus a third from hmask (bit
// 4 h + k of byte l: the third bit of element 128 h + 32 k + l).
inline void q3_k_half(const BlockQ3_K& w, int h, Bytes* q) {
  unpack_2bit_half(w.qs, h, q);
  Bytes high = shr16(load32(w.hmask), 4 * h);
  for (int k = 0; k < 4; ++k, high = shr16(high, 1)) q[k] = bytes_or(q[k], mask8(shl16(high, 2), 0x04));
}

// Q5_0 / Q5_1: the block's quants 0..31, Q4_0's nibbles plus qh's bits.
template <class Block>
inline Bytes q5_quants(const Block& w) {
  uint32_t qh;
  std::memcpy(&qh, w.qh, sizeof qh);
  return bytes_or(nibbles_of_16(w.qs), bits_to_bytes(qh, 0x10));
}

// The 32 IQ4 levels of a 32-value block's 16 quant bytes (IQ4_NL's nibble order), as signed bytes.
inline Bytes iq4_levels(const uint8_t* qs) { return iq4_lookup(nibbles_of_16(qs)); }

}  // namespace ggl::GGL_ISA::kquant
#endif
