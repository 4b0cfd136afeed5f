// See gemm_int16.h. Layouts:
//   column: int16 q[n] | float scale[n/32] | float sum[n/32], each part 64-byte aligned; the block
//           value is scale * q, and sum is the float sum of the block's activations (for Q4_1's min).
//   panel:  per block of 32 weights: two lane groups of 16 rows, each 16 vectors (one per pair of
//           weights) whose lane r holds that pair of row r as two int16; then the rows' scales
//           [2][16] and mins [2][16] as floats.
#include "ggml-like/gemm_int16.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "ggml-like/error.h"
#include "ggml-like/fp16.h"
#include "ggml-like/quant.h"
#include "ggml-like/x86_intrinsics.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#define GGL_INT16_GEMM 1
#endif

namespace ggl::int16_gemm {
namespace {

constexpr int64_t kBlock = kQuantBlock;  // 32 weights, 16 pairs
constexpr int64_t kPairs = kBlock / 2;
constexpr int64_t kLanes = 16;
constexpr size_t kGroupBytes = kPairs * kLanes * sizeof(int32_t);  // 1024
constexpr size_t kScalesOffset = 2 * kGroupBytes;
constexpr size_t kMinsOffset = kScalesOffset + 2 * kLanes * sizeof(float);
constexpr size_t kPanelBlockBytes = kMinsOffset + 2 * kLanes * sizeof(float);
static_assert(kPanelRows == 2 * kLanes);

constexpr size_t round64(size_t b) { return (b + 63) / 64 * 64; }

std::atomic<bool> g_enabled{true};

struct Column {
  const int16_t* q;
  const float* scale;
  const float* sum;
};

inline Column view(const void* p, int64_t n) {
  const auto* base = static_cast<const uint8_t*>(p);
  const size_t q_bytes = round64(n * sizeof(int16_t)), s_bytes = round64(n / kBlock * sizeof(float));
  return {reinterpret_cast<const int16_t*>(base), reinterpret_cast<const float*>(base + q_bytes),
          reinterpret_cast<const float*>(base + q_bytes + s_bytes)};
}

}  // namespace

void set_enabled(bool on) { g_enabled.store(on, std::memory_order_relaxed); }

size_t column_bytes(int64_t n) {
  return round64(n * sizeof(int16_t)) + 2 * round64(n / kBlock * sizeof(float));
}

size_t panel_bytes(int64_t n) { return n / kBlock * kPanelBlockBytes; }

#if GGL_INT16_GEMM
namespace {

// One block of 32 weights of a row as 32 int16 (the value before the block scale) plus its scale
// and min (the min is zero except for Q4_1).
inline __m512i unpack_block(Type t, const uint8_t* p, float& d, float& m) {
  m = 0.0f;
  if (t == Type::Q8_0) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(p);
    d = fp16_to_f32(b->d);
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs)));
  }
  // Q4_0 / Q4_1: the low nibbles are elements 0..15, the high nibbles 16..31.
  const uint8_t* qs;
  if (t == Type::Q4_0) {
    const auto* b = reinterpret_cast<const BlockQ4_0*>(p);
    d = fp16_to_f32(b->d);
    qs = b->qs;
  } else {
    const auto* b = reinterpret_cast<const BlockQ4_1*>(p);
    d = fp16_to_f32(b->d);
    m = fp16_to_f32(b->m);
    qs = b->qs;
  }
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i nib = _mm_set1_epi8(0x0F);
  const __m256i both = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), nib), _mm_and_si128(bytes, nib));
  const __m512i q = _mm512_cvtepu8_epi16(both);
  return t == Type::Q4_0 ? _mm512_sub_epi16(q, _mm512_set1_epi16(8)) : q;
}

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

// Register tile: 32 panel rows (two vectors of 16 lanes) by C columns. Each block's integer sums
// start from zero and are scaled into the float sums once per block.
constexpr int kMaxCols = 6;

template <int C, bool kHasMin>
void multiply_tile(const uint8_t* panel, int64_t blocks, const Column* cols, __m512 (*out)[C]) {
  __m512 acc[2][C];
  for (int g = 0; g < 2; ++g)
    for (int c = 0; c < C; ++c) acc[g][c] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* pb = panel + b * kPanelBlockBytes;
    __m512i isum[2][C];
    for (int g = 0; g < 2; ++g)
      for (int c = 0; c < C; ++c) isum[g][c] = _mm512_setzero_si512();
    const int16_t* xq[C];
    for (int c = 0; c < C; ++c) xq[c] = cols[c].q + b * kBlock;
    for (int j = 0; j < kPairs; ++j) {
      const __m512i w0 = _mm512_load_si512(pb + j * 64);
      const __m512i w1 = _mm512_load_si512(pb + kGroupBytes + j * 64);
      for (int c = 0; c < C; ++c) {
        int32_t pair;
        std::memcpy(&pair, xq[c] + 2 * j, sizeof pair);
        const __m512i x = _mm512_set1_epi32(pair);
        isum[0][c] = _mm512_dpwssd_epi32(isum[0][c], w0, x);
        isum[1][c] = _mm512_dpwssd_epi32(isum[1][c], w1, x);
      }
    }
    const auto* scales = reinterpret_cast<const float*>(pb + kScalesOffset);
    const __m512 d0 = _mm512_load_ps(scales), d1 = _mm512_load_ps(scales + kLanes);
    for (int c = 0; c < C; ++c) {
      const __m512 s = _mm512_set1_ps(cols[c].scale[b]);
      acc[0][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[0][c]), _mm512_mul_ps(d0, s), acc[0][c]);
      acc[1][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[1][c]), _mm512_mul_ps(d1, s), acc[1][c]);
    }
    if constexpr (kHasMin) {
      const auto* mins = reinterpret_cast<const float*>(pb + kMinsOffset);
      const __m512 m0 = _mm512_load_ps(mins), m1 = _mm512_load_ps(mins + kLanes);
      for (int c = 0; c < C; ++c) {
        const __m512 s = _mm512_set1_ps(cols[c].sum[b]);
        acc[0][c] = _mm512_fmadd_ps(m0, s, acc[0][c]);
        acc[1][c] = _mm512_fmadd_ps(m1, s, acc[1][c]);
      }
    }
  }
  for (int g = 0; g < 2; ++g)
    for (int c = 0; c < C; ++c) out[g][c] = acc[g][c];
}

template <int C, bool kHasMin>
void run_tile(const uint8_t* panel, int64_t rows, int64_t blocks, const Column* cols, float* const* y) {
  __m512 out[2][C];
  multiply_tile<C, kHasMin>(panel, blocks, cols, out);
  for (int g = 0; g < 2; ++g) {
    const int64_t valid = std::clamp<int64_t>(rows - g * kLanes, 0, kLanes);
    if (valid == 0) break;
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
    for (int c = 0; c < C; ++c) _mm512_mask_storeu_ps(y[c] + g * kLanes, mask, out[g][c]);
  }
}

template <bool kHasMin>
void multiply_all(const uint8_t* panel, int64_t rows, int64_t blocks, const Column* cols, float* const* y,
                  int64_t n_cols) {
  int64_t c0 = 0;
  for (; c0 + kMaxCols <= n_cols; c0 += kMaxCols) run_tile<kMaxCols, kHasMin>(panel, rows, blocks, cols + c0, y + c0);
  switch (n_cols - c0) {
    case 1: return run_tile<1, kHasMin>(panel, rows, blocks, cols + c0, y + c0);
    case 2: return run_tile<2, kHasMin>(panel, rows, blocks, cols + c0, y + c0);
    case 3: return run_tile<3, kHasMin>(panel, rows, blocks, cols + c0, y + c0);
    case 4: return run_tile<4, kHasMin>(panel, rows, blocks, cols + c0, y + c0);
    case 5: return run_tile<5, kHasMin>(panel, rows, blocks, cols + c0, y + c0);
    default: return;
  }
}

}  // namespace

bool supports(Type t, int64_t n) {
  return g_enabled.load(std::memory_order_relaxed) && (t == Type::Q4_0 || t == Type::Q4_1 || t == Type::Q8_0) &&
         n > 0 && n % kBlock == 0;
}

void quantize_column(const float* x, int64_t n, void* column) {
  auto* base = static_cast<uint8_t*>(column);
  const size_t q_bytes = round64(n * sizeof(int16_t)), s_bytes = round64(n / kBlock * sizeof(float));
  auto* q = reinterpret_cast<int16_t*>(base);
  auto* scale = reinterpret_cast<float*>(base + q_bytes);
  auto* sum = reinterpret_cast<float*>(base + q_bytes + s_bytes);
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + b * kBlock), v1 = _mm512_loadu_ps(x + b * kBlock + kLanes);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    sum[b] = _mm512_reduce_add_ps(_mm512_add_ps(v0, v1));
    // 32767 levels each side; an all-zero block gets scale 0 and zero quants.
    const float inv = amax > 0.0f ? 32767.0f / amax : 0.0f;
    scale[b] = amax / 32767.0f;
    const __m512 k = _mm512_set1_ps(inv);
    const __m256i q0 = _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(v0, k)));
    const __m256i q1 = _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(v1, k)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kBlock), q0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kBlock + kLanes), q1);
  }
}

void pack_panel(Type t, const uint8_t* w, size_t row_stride, int64_t rows, int64_t n, void* panel) {
  const size_t block_bytes = traits(t).block_bytes;
  auto* out = static_cast<uint8_t*>(panel);
  for (int64_t b = 0; b < n / kBlock; ++b) {
    uint8_t* pb = out + b * kPanelBlockBytes;
    auto* scales = reinterpret_cast<float*>(pb + kScalesOffset);
    auto* mins = reinterpret_cast<float*>(pb + kMinsOffset);
    for (int64_t g = 0; g < 2; ++g) {
      __m512i v[kLanes];
      for (int64_t r = 0; r < kLanes; ++r) {
        const int64_t row = g * kLanes + r;
        if (row < rows) {
          v[r] = unpack_block(t, w + row * row_stride + b * block_bytes, scales[row], mins[row]);
        } else {
          v[r] = _mm512_setzero_si512();
          scales[row] = mins[row] = 0.0f;
        }
      }
      transpose16(v);
      for (int64_t j = 0; j < kPairs; ++j) _mm512_store_si512(pb + g * kGroupBytes + j * 64, v[j]);
    }
  }
}

void multiply_panel(Type t, const void* panel, int64_t rows, int64_t n, const void* const* columns, float* const* y,
                    int64_t n_cols) {
  Column cols[64];
  const auto* p = static_cast<const uint8_t*>(panel);
  for (int64_t c0 = 0; c0 < n_cols; c0 += 64) {
    const int64_t count = std::min<int64_t>(64, n_cols - c0);
    for (int64_t c = 0; c < count; ++c) cols[c] = view(columns[c0 + c], n);
    if (t == Type::Q4_1)
      multiply_all<true>(p, rows, n / kBlock, cols, y + c0, count);
    else
      multiply_all<false>(p, rows, n / kBlock, cols, y + c0, count);
  }
}

#else  // no AVX-512 VNNI: callers take the float32 path

bool supports(Type, int64_t) { return false; }
void quantize_column(const float*, int64_t, void*) { fail("int16 GEMM: not built for this CPU"); }
void pack_panel(Type, const uint8_t*, size_t, int64_t, int64_t, void*) { fail("int16 GEMM: not built for this CPU"); }
void multiply_panel(Type, const void*, int64_t, int64_t, const void* const*, float* const*, int64_t) {
  fail("int16 GEMM: not built for this CPU");
}

#endif

}  // namespace ggl::int16_gemm
