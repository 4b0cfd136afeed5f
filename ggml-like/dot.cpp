#include "ggml-like/dot.h"

#include <cstring>

#include "ggml-like/error.h"
#include "ggml-like/fp16.h"
#include "ggml-like/quant.h"

namespace ggl {
namespace {

// Rows are processed in chunks of 32 weights (one quant block). Each chunk is decoded to floats
// once and then multiplied into every activation column of the tile, so the decoding cost is shared.
constexpr int kChunk = kQuantBlock;
constexpr int kHalf = kChunk / 2;
constexpr int kMaxCols = 4;  // activation columns per pass over a weight row

// A decoder turns chunk k of a row into 32 floats. Plain types also decode single elements for
// rows whose length is not a multiple of 32.
struct DecodeF32 {
  static constexpr size_t kChunkBytes = kChunk * sizeof(float);
  static void chunk(const uint8_t* p, float* w) { std::memcpy(w, p, kChunkBytes); }
  static float element(const uint8_t* row, int64_t i) {
    float v;
    std::memcpy(&v, row + i * sizeof(float), sizeof v);
    return v;
  }
};

struct DecodeF16 {
  static constexpr size_t kChunkBytes = kChunk * sizeof(uint16_t);
  static void chunk(const uint8_t* p, float* w) { fp16_to_f32_row(reinterpret_cast<const uint16_t*>(p), w, kChunk); }
  static float element(const uint8_t* row, int64_t i) {
    uint16_t h;
    std::memcpy(&h, row + i * sizeof h, sizeof h);
    return fp16_to_f32(h);
  }
};

struct DecodeBF16 {
  static constexpr size_t kChunkBytes = kChunk * sizeof(uint16_t);
  static void chunk(const uint8_t* p, float* w) { bf16_to_f32_row(reinterpret_cast<const uint16_t*>(p), w, kChunk); }
  static float element(const uint8_t* row, int64_t i) {
    uint16_t h;
    std::memcpy(&h, row + i * sizeof h, sizeof h);
    return bf16_to_f32(h);
  }
};

struct DecodeQ8_0 {
  static constexpr size_t kChunkBytes = sizeof(BlockQ8_0);
  static void chunk(const uint8_t* p, float* w) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(p);
    const float d = fp16_to_f32(b->d);
    for (int j = 0; j < kChunk; ++j) w[j] = d * static_cast<float>(b->qs[j]);
  }
  static float element(const uint8_t*, int64_t) { return 0.0f; }  // never called: n % 32 == 0
};

struct DecodeQ4_0 {
  static constexpr size_t kChunkBytes = sizeof(BlockQ4_0);
  static void chunk(const uint8_t* p, float* w) {
    const auto* b = reinterpret_cast<const BlockQ4_0*>(p);
    const float d = fp16_to_f32(b->d);
    const float offset = -8.0f * d;  // d * (q - 8) = d * q - 8 d
    for (int j = 0; j < kHalf; ++j) {
      w[j] = d * static_cast<float>(b->qs[j] & 0x0f) + offset;
      w[j + kHalf] = d * static_cast<float>(b->qs[j] >> 4) + offset;
    }
  }
  static float element(const uint8_t*, int64_t) { return 0.0f; }
};

struct DecodeQ4_1 {
  static constexpr size_t kChunkBytes = sizeof(BlockQ4_1);
  static void chunk(const uint8_t* p, float* w) {
    const auto* b = reinterpret_cast<const BlockQ4_1*>(p);
    const float d = fp16_to_f32(b->d);
    const float m = fp16_to_f32(b->m);
    for (int j = 0; j < kHalf; ++j) {
      w[j] = d * static_cast<float>(b->qs[j] & 0x0f) + m;
      w[j + kHalf] = d * static_cast<float>(b->qs[j] >> 4) + m;
    }
  }
  static float element(const uint8_t*, int64_t) { return 0.0f; }
};

// out[c] = dot(row, xs[c]) for C columns. Partial sums are kept in kHalf independent lanes
// (no reassociation needed, so the loops vectorise) and added up once at the end.
template <class Decode, int C>
void dot_columns(const uint8_t* row, int64_t n, const float* const* xs, float* out) {
  float acc[C][kHalf] = {};
  const int64_t chunks = n / kChunk;
  alignas(64) float w[kChunk];
  for (int64_t k = 0; k < chunks; ++k) {
    Decode::chunk(row + k * Decode::kChunkBytes, w);
    for (int c = 0; c < C; ++c) {
      const float* x = xs[c] + k * kChunk;
      for (int j = 0; j < kHalf; ++j) acc[c][j] += w[j] * x[j] + w[j + kHalf] * x[j + kHalf];
    }
  }
  for (int c = 0; c < C; ++c) {
    float sum = 0.0f;
    for (int j = 0; j < kHalf; ++j) sum += acc[c][j];
    for (int64_t i = chunks * kChunk; i < n; ++i) sum += Decode::element(row, i) * xs[c][i];
    out[c] = sum;
  }
}

template <class Decode>
void matmul_rows(const uint8_t* w, size_t row_stride, int64_t n, const float* x, int64_t x_stride, int64_t n_cols,
                 float* y, int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const float* xs[kMaxCols];
  float out[kMaxCols];
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = w + static_cast<size_t>(r) * row_stride;
    for (int64_t c0 = 0; c0 < n_cols; c0 += kMaxCols) {
      const int cols = static_cast<int>(n_cols - c0 < kMaxCols ? n_cols - c0 : kMaxCols);
      for (int c = 0; c < cols; ++c) xs[c] = x + (c0 + c) * x_stride;
      switch (cols) {
        case 1: dot_columns<Decode, 1>(row, n, xs, out); break;
        case 2: dot_columns<Decode, 2>(row, n, xs, out); break;
        case 3: dot_columns<Decode, 3>(row, n, xs, out); break;
        default: dot_columns<Decode, 4>(row, n, xs, out); break;
      }
      for (int c = 0; c < cols; ++c) y[(c0 + c) * y_stride + r] = out[c];
    }
  }
}

void check_shape(const char* what, Type t, int64_t n) {
  if (!is_weight_type(t)) fail("{}: unsupported weight type {}", what, type_name(t));
  const int block = traits(t).block_size;
  if (n < 0 || n % block != 0)
    fail("{}: row of {} elements is not a multiple of the {} block size {}", what, n, type_name(t), block);
}

}  // namespace

void matmul(Type t, const void* w, int64_t rows, int64_t n, const float* x, int64_t x_stride, int64_t n_cols,
            float* y, int64_t y_stride, int64_t row_begin, int64_t row_end) {
  check_shape("matmul", t, n);
  if (row_begin < 0 || row_end > rows || row_begin > row_end)
    fail("matmul: row range [{}, {}) outside the {} rows", row_begin, row_end, rows);
  const auto* wb = static_cast<const uint8_t*>(w);
  const size_t stride = row_bytes(t, n);
  switch (t) {
    case Type::F32: return matmul_rows<DecodeF32>(wb, stride, n, x, x_stride, n_cols, y, y_stride, row_begin, row_end);
    case Type::F16: return matmul_rows<DecodeF16>(wb, stride, n, x, x_stride, n_cols, y, y_stride, row_begin, row_end);
    case Type::BF16: return matmul_rows<DecodeBF16>(wb, stride, n, x, x_stride, n_cols, y, y_stride, row_begin, row_end);
    case Type::Q8_0: return matmul_rows<DecodeQ8_0>(wb, stride, n, x, x_stride, n_cols, y, y_stride, row_begin, row_end);
    case Type::Q4_0: return matmul_rows<DecodeQ4_0>(wb, stride, n, x, x_stride, n_cols, y, y_stride, row_begin, row_end);
    case Type::Q4_1: return matmul_rows<DecodeQ4_1>(wb, stride, n, x, x_stride, n_cols, y, y_stride, row_begin, row_end);
    default: return;  // rejected by check_shape
  }
}

void matvec(Type t, const void* w, int64_t rows, int64_t n, const float* x, float* y) {
  matmul(t, w, rows, n, x, n, 1, y, rows, 0, rows);
}

float dot_row(Type t, const void* w_row, const float* x, int64_t n) {
  float y = 0.0f;
  matmul(t, w_row, 1, n, x, n, 1, &y, 1, 0, 1);
  return y;
}

}  // namespace ggl
