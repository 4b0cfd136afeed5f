// The CUDA kernels' block decoding (ggml-like/cuda/block_decode.h), run on the host: every weight
// type's group decoders against the reference dequantizers, and a warp's worth of lanes'
// dot-product shares against a plain dot product; and mul_mat_id's tiles of pairs by expert
// (expert_tiles.h). Runs in every build: this is the part of the
// kernels that can be checked without a GPU.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ggml-like/core/fp16.h"
#include "ggml-like/cuda/block_decode.h"
#include "ggml-like/cuda/expert_tiles.h"
#include "ggml-like/quant/quant.h"
#include "tests/support/random_floats.h"

namespace test_cuda_block_decode {

using ggl::Type;
namespace blocks = ggl::blocks;

// Decodes row (n values of type t) group by group with the kernels' decoders.
std::vector<float> decode_row(Type t, const uint8_t* row, int64_t n) {
  std::vector<float> out(n);
  const bool known = blocks::with_decoder(t, [&](auto d) {
    using D = decltype(d);
    for (int64_t gi = 0; gi < n / blocks::kGroup; ++gi)
      blocks::decode_group<D>(row, gi, out.data() + gi * blocks::kGroup);
  });
  EXPECT_TRUE(known) << ggl::type_name(t);
  return out;
}

TEST(CudaBlockDecode, EveryWeightTypeHasADecoderMatchingItsBlocks) {
  for (Type t : latte::testing::weight_types()) {
    const int values = blocks::decoder_values(t);
    ASSERT_GT(values, 0) << ggl::type_name(t) << " has no device decoder";
    const ggl::TypeTraits& tr = ggl::traits(t);
    EXPECT_EQ(values % tr.block_size, 0) << ggl::type_name(t);
    EXPECT_EQ(ggl::row_bytes(t, values), static_cast<size_t>(values / tr.block_size) * tr.block_bytes);
    blocks::with_decoder(t, [&](auto d) {
      EXPECT_EQ(static_cast<size_t>(decltype(d)::kBytes), ggl::row_bytes(t, values)) << ggl::type_name(t);
    });
  }
  EXPECT_EQ(blocks::decoder_values(Type::Q8_K), 0);  // an activation format, never a weight
  EXPECT_EQ(blocks::decoder_values(Type::I32), 0);
}

TEST(CudaBlockDecode, Iq4LevelsMatchTheTable) {
  for (int q = 0; q < 16; ++q) EXPECT_EQ(blocks::iq4_level(q), ggl::kIq4Values[q]) << q;
}

TEST(CudaBlockDecode, HalfConversionIsExactForEveryBitPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float want = ggl::fp16_to_f32(static_cast<uint16_t>(h)), got = blocks::half_to_float(h);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
      continue;
    }
    uint32_t a, b;
    std::memcpy(&a, &want, 4);
    std::memcpy(&b, &got, 4);
    ASSERT_EQ(a, b) << "fp16 bits " << h;
  }
}

// Rows of every weight type, decoded from an odd address (GGUF blocks have no alignment beyond 2
// bytes, views of them less): the same values as the reference dequantizer.
TEST(CudaBlockDecode, RowsMatchTheReferenceDequantizer) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr int64_t kRows = 4, kN = 512;
  for (Type t : latte::testing::weight_types()) {
    const auto rows = latte::testing::quantized_rows(t, kRows, kN, rng, normal);
    for (int64_t r = 0; r < kRows; ++r) {
      std::vector<uint8_t> shifted(rows.stride + 1);
      const bool plain_f32 = t == Type::F32;  // the kernels read f32 weights as floats: 4-byte aligned
      uint8_t* row = shifted.data() + (plain_f32 ? 0 : 1);
      std::memcpy(row, rows.bytes.data() + r * rows.stride, rows.stride);
      const std::vector<float> got = decode_row(t, row, kN);
      for (int64_t i = 0; i < kN; ++i) {
        const float want = rows.values[r * kN + i];
        // Equal up to a contracted multiply-add (the device compiler may fuse d * q - m).
        ASSERT_NEAR(got[i], want, 1e-6f * std::fabs(want) + 1e-9f)
            << ggl::type_name(t) << " row " << r << " value " << i;
      }
    }
  }
}

// 32 lanes' shares of a row's dot products with 1 and 3 columns, summed as the warp does, against
// a double-precision dot product of the dequantized row.
TEST(CudaBlockDecode, WarpSharesOfTheDotProductSumToTheRowsDot) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr int64_t kN = 768;  // 3 super-blocks: lanes get unequal numbers of groups
  constexpr int kCols = 8;
  for (Type t : latte::testing::weight_types()) {
    const auto rows = latte::testing::quantized_rows(t, 2, kN, rng, normal);
    std::vector<std::vector<float>> x;
    for (int c = 0; c < 3; ++c) x.push_back(latte::testing::random_floats(kN, 100 + c));
    const float* xs[kCols] = {x[0].data(), x[1].data(), x[2].data()};
    for (int m : {1, 3})
      for (int64_t r = 0; r < 2; ++r) {
        float acc[32][kCols] = {};
        blocks::with_decoder(t, [&](auto d) {
          for (int lane = 0; lane < 32; ++lane)
            blocks::row_dot_lane<decltype(d), kCols>(rows.bytes.data() + r * rows.stride, kN, xs, m, lane, 32,
                                                     acc[lane]);
        });
        for (int c = 0; c < kCols; ++c) {
          double got = 0, want = 0, magnitude = 0;
          for (int lane = 0; lane < 32; ++lane) got += acc[lane][c];
          if (c >= m) {
            EXPECT_EQ(got, 0.0) << "column " << c << " beyond m was touched";
            continue;
          }
          for (int64_t i = 0; i < kN; ++i) {
            want += static_cast<double>(rows.values[r * kN + i]) * xs[c][i];
            magnitude += std::fabs(static_cast<double>(rows.values[r * kN + i]) * xs[c][i]);
          }
          EXPECT_NEAR(got, want, 1e-5 * magnitude) << ggl::type_name(t) << " row " << r << " column " << c;
        }
      }
  }
}

// route_pairs' steps on the host: every valid (slot, token) pair lands in exactly one tile of its
// expert, tiles hold 1..kTilePairs pairs, and there are no more than the work buffer holds.
TEST(CudaExpertTiles, EveryRoutedPairIsInOneTileOfItsExpert) {
  std::mt19937 rng(5);
  const std::vector<std::array<int, 3>> shapes = {{6, 37, 16}, {2, 1, 64}, {8, 100, 3}, {1, 9, 1}};
  for (const auto& [slots, tokens, experts] : shapes) {
    const int pairs = slots * tokens;
    std::uniform_int_distribution<int> pick(-1, experts);  // -1 and `experts` are invalid ids
    std::vector<int32_t> ids(pairs), counts(experts, 0), cursor(experts);
    for (int32_t& id : ids) id = pick(rng);
    for (int32_t id : ids)
      if (id >= 0 && id < experts) ++counts[id];
    const int64_t bound = blocks::max_expert_tiles(pairs, experts);
    std::vector<int32_t> tiles(3 * bound), sorted(pairs, -1);
    const int32_t n_tiles = blocks::make_expert_tiles(counts.data(), experts, cursor.data(), tiles.data());
    ASSERT_LE(n_tiles, bound);
    for (int p = 0; p < pairs; ++p)
      if (ids[p] >= 0 && ids[p] < experts) sorted[cursor[ids[p]]++] = p;
    std::vector<int> seen(pairs, 0);
    for (int32_t t = 0; t < n_tiles; ++t) {
      const int32_t e = tiles[3 * t], first = tiles[3 * t + 1], count = tiles[3 * t + 2];
      ASSERT_GE(count, 1);
      ASSERT_LE(count, blocks::kTilePairs);
      for (int32_t c = 0; c < count; ++c) {
        const int32_t p = sorted[first + c];
        ASSERT_GE(p, 0) << "tile " << t << " reaches an unfilled place";
        EXPECT_EQ(ids[p], e) << "pair " << p << " in a tile of expert " << e;
        ++seen[p];
      }
    }
    for (int p = 0; p < pairs; ++p) EXPECT_EQ(seen[p], ids[p] >= 0 && ids[p] < experts ? 1 : 0) << "pair " << p;
  }
}

}  // namespace test_cuda_block_decode
