// kInt16Gemm (int_gemm.h): 16-bit activations, VPDPWSSD. Layouts:
//   column: int16 q[n] | float scale[n/32] | float sum[n/32] | float offset[n/32] | float
//           hi_offset[n/32] | int8 hi[n] | uint8 lo[n], each part 64-byte aligned; the block value
//           is scale * q, sum is the float sum of the block's activations (for Q4_1's min), and
//           the rest serve the rows path: q = 256 * hi + lo, offset is scale times the sum of the
//           block's q, hi_offset scale * 4096 times the sum of its hi.
//   panel:  per block of 32 weights: two lane groups of 16 rows, each 16 vectors (one per pair of
//           weights) whose lane r holds that pair of row r as two int16; then the rows' scales
//           [2][16] and mins [2][16] as floats (gemm_panel.h).
#include <algorithm>
#include <cstring>

#include "ggml-like/cpu/arch/x86/avx512/gemm_panel.h"
#include "ggml-like/cpu/arch/x86/avx512/gemm_rows.h"
#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/quant/quant.h"

#include "ggml-like/cpu/simd/simd_kernels.h"

namespace ggl::GGL_ISA {
namespace {
#if GGL_INT_GEMM

constexpr int64_t kBlock = kQuantBlock;  // 32 weights, 16 pairs
constexpr int64_t kPairs = kBlock / 2;

constexpr size_t round64(size_t b) { return (b + 63) / 64 * 64; }
size_t scales_bytes(int64_t n) { return round64(n / kBlock * sizeof(float)); }

size_t column_bytes(int64_t n) { return round64(n * sizeof(int16_t)) + 4 * scales_bytes(n) + 2 * round64(n); }

struct Column {
  const int16_t* q;
  const float* scale;
  const float* sum;
  const float* offset;
  const float* hi_offset;
  const int8_t* hi;
  const uint8_t* lo;
};

using gemm_panel::kLanes;

// In place: v[r] lane j becomes v[j] lane r (a 16 x 16 transpose of 32-bit elements).
inline void transpose16(__m512i* v) {
  __m512i a[16], b[16];
  for (int i = 0; i < 16; i += 2) {  // interleave rows pairwise, 32 bits at a time
    a[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
    a[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
  }
  // Now 64 bits at a time: 128-bit lane L of b[4i + k] holds column 4L + k of rows 4i..4i+3.
  for (int i = 0; i < 16; i += 4) {
    b[i] = _mm512_unpacklo_epi64(a[i], a[i + 2]);
    b[i + 1] = _mm512_unpackhi_epi64(a[i], a[i + 2]);
    b[i + 2] = _mm512_unpacklo_epi64(a[i + 1], a[i + 3]);
    b[i + 3] = _mm512_unpackhi_epi64(a[i + 1], a[i + 3]);
  }
  // Finally gather 128-bit lane L of b[k], b[4 + k], b[8 + k], b[12 + k] into column 4L + k.
  for (int k = 0; k < 4; ++k) {
    const __m512i c0 = _mm512_shuffle_i32x4(b[k], b[4 + k], 0x44), c1 = _mm512_shuffle_i32x4(b[k], b[4 + k], 0xEE);
    const __m512i c2 = _mm512_shuffle_i32x4(b[8 + k], b[12 + k], 0x44),
                  c3 = _mm512_shuffle_i32x4(b[8 + k], b[12 + k], 0xEE);
    v[k] = _mm512_shuffle_i32x4(c0, c2, 0x88);
    v[4 + k] = _mm512_shuffle_i32x4(c0, c2, 0xDD);
    v[8 + k] = _mm512_shuffle_i32x4(c1, c3, 0x88);
    v[12 + k] = _mm512_shuffle_i32x4(c1, c3, 0xDD);
  }
}

// The 16 pair vectors of one lane group from 16 rows' 16 bytes of 4-bit quants (element i in the
// low nibble of byte i, element 16 + i in its high nibble), without widening first: the bytes are
// transposed two at a time (byte pair u holds elements 2u, 2u + 1 and 2u + 16, 2u + 17), then the
// nibbles split and widened. Q4_0 quants are offset by 8.
void pack_q4_group(const uint8_t* const* qs, bool offset8, uint8_t* out) {
  __m512i z[4];
  gemm_panel::load_q4_rows(qs, z);
  // Word slot s of the transposed vector for byte pairs u = 2p, 2p + 1: row R = s % 16 and
  // u = 2p + s / 16, found in z[R / 4] at word (R % 4) * 8 + u; rows 0..7 come from (z0, z1), rows
  // 8..15 from (z2, z3) at the same indices.
  alignas(64) int16_t index[32];
  for (int slot = 0; slot < 32; ++slot) {
    const int r = slot % 8;
    index[slot] = static_cast<int16_t>((r / 4) * 32 + (r % 4) * 8 + slot / 16);
  }
  const __m512i base = _mm512_load_si512(index);
  const __m512i low4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
  auto widen = [offset8](__m256i bytes) {
    return offset8 ? _mm512_cvtepi8_epi16(bytes) : _mm512_cvtepu8_epi16(bytes);
  };
  for (int p = 0; p < 4; ++p) {
    const __m512i idx = _mm512_add_epi16(base, _mm512_set1_epi16(static_cast<short>(2 * p)));
    const __m512i rows0_7 = _mm512_permutex2var_epi16(z[0], idx, z[1]);
    const __m512i rows8_15 = _mm512_permutex2var_epi16(z[2], idx, z[3]);
    const __m512i pairs = _mm512_mask_blend_epi16(0xFF00FF00u, rows0_7, rows8_15);
    __m512i lo = _mm512_and_si512(pairs, low4), hi = _mm512_and_si512(_mm512_srli_epi16(pairs, 4), low4);
    if (offset8) {
      lo = _mm512_sub_epi8(lo, eight);
      hi = _mm512_sub_epi8(hi, eight);
    }
    const int j = 2 * p;  // pairs j, j + 1 (low nibbles) and j + 8, j + 9 (high nibbles)
    _mm512_store_si512(out + j * 64, widen(_mm512_castsi512_si256(lo)));
    _mm512_store_si512(out + (j + 1) * 64, widen(_mm512_extracti64x4_epi64(lo, 1)));
    _mm512_store_si512(out + (j + 8) * 64, widen(_mm512_castsi512_si256(hi)));
    _mm512_store_si512(out + (j + 9) * 64, widen(_mm512_extracti64x4_epi64(hi, 1)));
  }
}

// 16-bit activations: a step adds a pair of weight-activation products per lane (VPDPWSSD).
struct Format {
  using Column = GGL_ISA::Column;
  static constexpr int kSteps = kPairs;
  static Column view(const void* p, int64_t n) {
    const auto* base = static_cast<const uint8_t*>(p);
    const size_t q = round64(n * sizeof(int16_t)), s = scales_bytes(n);
    return {reinterpret_cast<const int16_t*>(base),          reinterpret_cast<const float*>(base + q),
            reinterpret_cast<const float*>(base + q + s),      reinterpret_cast<const float*>(base + q + 2 * s),
            reinterpret_cast<const float*>(base + q + 3 * s),  reinterpret_cast<const int8_t*>(base + q + 4 * s),
            reinterpret_cast<const uint8_t*>(base + q + 4 * s + round64(n))};
  }
  // Q4_0's offset of 8 comes off while unpacking (its weights are signed 16-bit integers here).
  static int32_t zero_point(Type) { return 0; }
  static int32_t start(const Column&, int64_t, int32_t) { return 0; }
  static int32_t word(const Column& c, int64_t b, int j) {
    int32_t pair;
    std::memcpy(&pair, c.q + b * kBlock + 2 * j, sizeof pair);
    return pair;
  }
  static __m512i dot(__m512i acc, __m512i w, __m512i x) { return _mm512_dpwssd_epi32(acc, w, x); }
  static void pack_group(Type t, const uint8_t* const* qs, uint8_t* out) {
    if (t != Type::Q8_0) return pack_q4_group(qs, t == Type::Q4_0, out);
    __m512i v[kLanes];
    for (int64_t r = 0; r < kLanes; ++r)
      v[r] = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs[r])));
    transpose16(v);
    for (int64_t j = 0; j < kPairs; ++j) _mm512_store_si512(out + j * 64, v[j]);
  }
};

// The rows path (gemm_rows.h): VPDPBUSD multiplies bytes, so the 16-bit values go in two: the
// weights times the high bytes (signed), shifted up 8 bits, plus the low bytes (unsigned) times
// the weights. Two byte products per 4 weights instead of one 16-bit product per 2, with no
// widening of the weights. VPDPBUSD takes one unsigned side: 4-bit weights are unsigned; Q8_0's
// signed bytes meet the signed high bytes as w + 128 (the sign bit flipped), and the extra
// 128 * hi comes off through hi_offset.
struct RowsFormat {
  static constexpr bool kTakesQ8_0 = true;
  struct Column {
    gemm_rows::BlockScales scales;
    const int8_t* hi;
    const uint8_t* lo;
  };
  static Column view(const void* p, int64_t n) {
    const GGL_ISA::Column c = Format::view(p, n);
    return {{c.scale, c.offset, c.sum, c.hi_offset}, c.hi, c.lo};
  }
  static __m256i halves(const Column& c, int64_t b, __m256i* lo) {
    *lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c.lo + b * kBlock));
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c.hi + b * kBlock));
  }
  static __m256i sums(__m256i w, const Column& c, int64_t b) {
    __m256i lo;
    const __m256i hi = halves(c, b, &lo);
    return _mm256_dpbusd_epi32(_mm256_slli_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), w, hi), 8), lo, w);
  }
  static __m256i signed_sums(__m256i w, const Column& c, int64_t b) {
    __m256i lo;
    const __m256i hi = halves(c, b, &lo);
    const __m256i w_unsigned = _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80)));
    return _mm256_dpbusd_epi32(_mm256_slli_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), w_unsigned, hi), 8),
                               lo, w);
  }
};

size_t panel_bytes(int64_t n) { return n / kBlock * gemm_panel::PanelBlock<Format>::kBytes; }

bool supports(Type t, int64_t n) {
  return int_gemm_enabled() && (t == Type::Q4_0 || t == Type::Q4_1 || t == Type::Q8_0) && n > 0 && n % kBlock == 0;
}


void quantize_column(const float* x, int64_t n, void* column) {
  auto* base = static_cast<uint8_t*>(column);
  const size_t q_bytes = round64(n * sizeof(int16_t)), s_bytes = scales_bytes(n);
  auto* q = reinterpret_cast<int16_t*>(base);
  auto* scale = reinterpret_cast<float*>(base + q_bytes);
  auto* sum = reinterpret_cast<float*>(base + q_bytes + s_bytes);
  auto* offset = reinterpret_cast<float*>(base + q_bytes + 2 * s_bytes);
  auto* hi_offset = reinterpret_cast<float*>(base + q_bytes + 3 * s_bytes);
  auto* hi = reinterpret_cast<int8_t*>(base + q_bytes + 4 * s_bytes);
  auto* lo = reinterpret_cast<uint8_t*>(base + q_bytes + 4 * s_bytes + round64(n));
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const gemm_panel::QuantizedBlock block = gemm_panel::quantize_block(x + b * kBlock, 32767.0f);
    scale[b] = block.scale;
    sum[b] = block.sum;
    offset[b] = block.scale * static_cast<float>(_mm512_reduce_add_epi32(_mm512_add_epi32(block.lo, block.hi)));
    int16_t* qb = q + b * kBlock;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb), _mm512_cvtsepi32_epi16(block.lo));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb + kLanes), _mm512_cvtsepi32_epi16(block.hi));
    int32_t hi_sum = 0;
    for (int64_t i = 0; i < kBlock; ++i) {
      hi[b * kBlock + i] = static_cast<int8_t>(qb[i] >> 8);
      lo[b * kBlock + i] = static_cast<uint8_t>(qb[i] & 0xFF);
      hi_sum += hi[b * kBlock + i];
    }
    hi_offset[b] = block.scale * 4096.0f * static_cast<float>(hi_sum);
  }
}

#endif

}  // namespace

#if GGL_INT_GEMM
const IntGemm kInt16Gemm{"int16",        32767,       supports, column_bytes, quantize_column, panel_bytes,
                         gemm_panel::pack_panel<Format>, gemm_panel::multiply_panel<Format>,
                         gemm_rows::multiply_rows<RowsFormat>};
#else  // no AVX-512 VNNI
const IntGemm kInt16Gemm = unavailable_int_gemm("int16", 32767);
#endif

}  // namespace ggl::GGL_ISA
