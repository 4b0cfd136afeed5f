// kInt8Gemm (int_gemm.h): 8-bit activations, VPDPBUSD, for 4-bit weights. Layouts:
//   column: int8 q[n] | float scale[n/32] | int32 qsum[n/32] (sum of the block's q) | float
//           sum[n/32] (the float sum of the block's activations, for Q4_1's min) | float
//           offset[n/32] (scale * qsum, for the rows path); parts 64-byte aligned.
//   panel:  per block of 32 weights: two lane groups of 16 rows, each 8 vectors (one per 4
//           consecutive weights) whose lane r holds those 4 weights of row r as unsigned bytes
//           (the 4-bit quant, 0..15); then the rows' scales [2][16] and mins [2][16] (gemm_panel.h).
// Q4_0's weights are (q - 8) * d: the 8 comes off through the column's qsum, which seeds each
// block's integer sum with -8 * qsum.
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

constexpr int64_t kBlock = kQuantBlock;
constexpr int64_t kQuadsPerBlock = kBlock / 4;  // 4 weights per 32-bit lane

constexpr size_t round64(size_t b) { return (b + 63) / 64 * 64; }
size_t scales_bytes(int64_t n) { return round64(n / kBlock * sizeof(float)); }

size_t column_bytes(int64_t n) { return round64(n) + 4 * scales_bytes(n); }

struct Column {
  const int8_t* q;
  const float* scale;
  const int32_t* qsum;
  const float* sum;
  const float* offset;  // scale * qsum (the rows path's zero point)
};

using gemm_panel::kLanes;

// The 8 step vectors of one lane group from 16 rows' 16 bytes of 4-bit quants: the bytes are
// transposed 4 at a time (dword u holds elements 4u..4u+3 in its low nibbles and 16+4u..19+4u in
// its high nibbles), then the nibbles split into steps u and u + 4.
void pack_q4_group(const uint8_t* const* qs, uint8_t* out) {
  __m512i z[4];
  gemm_panel::load_q4_rows(qs, z);
  // Lane R of the transposed dword u: z[R / 4] dword (R % 4) * 4 + u; rows 0..7 from (z0, z1),
  // rows 8..15 from (z2, z3) at the same indices.
  alignas(64) int32_t index[kLanes];
  for (int r = 0; r < kLanes; ++r) index[r] = (r % 8 / 4) * 16 + (r % 4) * 4;
  const __m512i base = _mm512_load_si512(index);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int u = 0; u < 4; ++u) {
    const __m512i idx = _mm512_add_epi32(base, _mm512_set1_epi32(u));
    const __m512i quads = _mm512_mask_blend_epi32(0xFF00, _mm512_permutex2var_epi32(z[0], idx, z[1]),
                                                  _mm512_permutex2var_epi32(z[2], idx, z[3]));
    _mm512_store_si512(out + u * 64, _mm512_and_si512(quads, low4));
    _mm512_store_si512(out + (u + 4) * 64, _mm512_and_si512(_mm512_srli_epi16(quads, 4), low4));
  }
}

// 8-bit activations: a step adds 4 weight-activation byte products per lane (VPDPBUSD, weights
// unsigned); a block's sum starts at -zero_point * qsum, removing the quants' offset.
struct Format {
  using Column = GGL_ISA::Column;
  static constexpr int kSteps = kQuadsPerBlock;
  static Column view(const void* p, int64_t n) {
    const auto* base = static_cast<const uint8_t*>(p);
    const size_t s = scales_bytes(n), q = round64(n);
    return {reinterpret_cast<const int8_t*>(base), reinterpret_cast<const float*>(base + q),
            reinterpret_cast<const int32_t*>(base + q + s), reinterpret_cast<const float*>(base + q + 2 * s),
            reinterpret_cast<const float*>(base + q + 3 * s)};
  }
  static int32_t zero_point(Type t) { return t == Type::Q4_0 ? 8 : 0; }
  static int32_t start(const Column& c, int64_t b, int32_t zero_point) { return -zero_point * c.qsum[b]; }
  static int32_t word(const Column& c, int64_t b, int j) {
    int32_t quad;
    std::memcpy(&quad, c.q + b * kBlock + 4 * j, sizeof quad);
    return quad;
  }
  static __m512i dot(__m512i acc, __m512i w, __m512i x) { return _mm512_dpbusd_epi32(acc, w, x); }
  static void pack_group(Type, const uint8_t* const* qs, uint8_t* out) { pack_q4_group(qs, out); }
};

size_t panel_bytes(int64_t n) { return n / kBlock * gemm_panel::PanelBlock<Format>::kBytes; }

bool supports(Type t, int64_t n) {
  return int_gemm_enabled() && (t == Type::Q4_0 || t == Type::Q4_1) && n > 0 && n % kBlock == 0;
}

void quantize_column(const float* x, int64_t n, void* column) {
  auto* base = static_cast<uint8_t*>(column);
  const size_t s = scales_bytes(n), qb = round64(n);
  auto* q = reinterpret_cast<int8_t*>(base);
  auto* scale = reinterpret_cast<float*>(base + qb);
  auto* qsum = reinterpret_cast<int32_t*>(base + qb + s);
  auto* sum = reinterpret_cast<float*>(base + qb + 2 * s);
  auto* offset = reinterpret_cast<float*>(base + qb + 3 * s);
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const gemm_panel::QuantizedBlock block = gemm_panel::quantize_block(x + b * kBlock, 127.0f);
    scale[b] = block.scale;
    sum[b] = block.sum;
    qsum[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(block.lo, block.hi));
    offset[b] = block.scale * static_cast<float>(qsum[b]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kBlock), _mm512_cvtsepi32_epi8(block.lo));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kBlock + kLanes), _mm512_cvtsepi32_epi8(block.hi));
  }
}

// The rows path (gemm_rows.h): a block's 32 nibbles times its 32 activation bytes, 8 lane sums.
struct RowsFormat {
  static constexpr bool kTakesQ8_0 = false;
  struct Column {
    gemm_rows::BlockScales scales;
    const int8_t* q;
  };
  static Column view(const void* p, int64_t n) {
    const GGL_ISA::Column c = Format::view(p, n);
    return {{c.scale, c.offset, c.sum, nullptr}, c.q};
  }
  static __m256i sums(__m256i w, const Column& c, int64_t b) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), w,
                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c.q + b * kBlock)));
  }
};

#endif

}  // namespace

#if GGL_INT_GEMM
const IntGemm kInt8Gemm{"int8",         127,         supports, column_bytes, quantize_column, panel_bytes,
                        gemm_panel::pack_panel<Format>, gemm_panel::multiply_panel<Format>,
                        gemm_rows::multiply_rows<RowsFormat>};
#else  // no AVX-512 VNNI
const IntGemm kInt8Gemm = unavailable_int_gemm("int8", 127);
#endif

}  // namespace ggl::GGL_ISA
