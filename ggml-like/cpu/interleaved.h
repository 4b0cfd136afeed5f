// Weight rows interleaved 8 at a time, the layout the CPU's decode kernels read fastest
// (cpu/simd/gemm_rows8.h): a product with one activation column then handles 8 rows per vector,
// so each block's activation broadcast, unpacking and scale conversion serve 8 rows instead of
// one. Rewritten from a file's rows once, when a model is loaded (repacked_weights.h); never
// stored in a file, and known only here in cpu/: to core they are backend layouts
// (core/types.h), and no graph is built with them.
//
// Q4_0_R8 / Q8_0_R8: a Q4_0 / Q8_0 matrix in groups of 8 consecutive rows. Per group, per block
// column b (32 weights of each row), 8 blocks' bytes: the 8 rows' fp16 scales, then the rows'
// quant bytes 4 at a time, the quant bytes 4u..4u+3 of row r at (u * 8 + r) * 4 (Q4_0: 16 quant
// bytes a block, whose low nibbles are elements 4u..4u+3 and high nibbles 16+4u..19+4u; Q8_0: 32,
// elements 4u..4u+3).
//
// Q6_K_R8: a Q6_K matrix in groups of 8 rows. Per group, per super-block column (256 weights of
// each row), 8 super-blocks' bytes (1680): the 8 rows' fp16 d; their 16 scales as [16][8] (scale
// j of row r at 8 j + r); then per 32-value sub-block c, 96 bytes of each row laid out as 4 + 2
// quads of 8 rows: quad u (u < 4) holds in lane r the low 4 bits of elements 4u..4u+3 (low
// nibbles) and 16+4u..19+4u (high nibbles), and the 2 quads of high bits hold in byte j of lane r
// the top 2 bits of elements j + 4u (first quad) and 16 + j + 4u (second) at bits 2u, 2u+1. So
// one load, a nibble split and a shift give 6-bit quants of 4 elements of 8 rows.
//
// A group takes exactly the bytes of its 8 plain rows, so row strides and the start of every
// group (a multiple of 8 rows) are those of the plain matrix.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "ggml-like/core/types.h"

namespace ggl {

// The CPU's backend layouts (core/types.h), the ids earlier builds gave them.
inline constexpr Type kQ4_0_R8 = backend_layout(Type::Q4_0, 1);
inline constexpr Type kQ8_0_R8 = backend_layout(Type::Q8_0, 1);
inline constexpr Type kQ6_K_R8 = backend_layout(Type::Q6_K, 1);

inline constexpr int64_t kInterleavedRows = 8;
// The most quant bytes a plain block of an interleaved type has (Q8_0's).
inline constexpr size_t kMaxInterleavedQuantBytes = kQuantBlock;

// Q6_K_R8's group super-block: where its parts start, and its size.
namespace q6_k_r8 {
inline constexpr size_t kScales = kInterleavedRows * sizeof(uint16_t);  // after the 8 fp16 d
inline constexpr size_t kQuants = kScales + kInterleavedRows * 16;      // after the [16][8] scales
inline constexpr size_t kSubBlockBytes = 6 * kInterleavedRows * 4;      // 4 + 2 quads of 8 rows
inline constexpr size_t kGroupBytes = kQuants + 8 * kSubBlockBytes;     // 1680: 8 plain super-blocks
}  // namespace q6_k_r8

// The interleaved type a matrix of type t, n_rows rows, can be rewritten into (Q4_0 -> Q4_0_R8,
// Q8_0 -> Q8_0_R8, Q6_K -> Q6_K_R8, where n_rows is a multiple of 8); std::nullopt for the others.
std::optional<Type> interleaved_type(Type t, int64_t n_rows);
bool is_interleaved(Type t);
// The file type an interleaved type rewrites (Q4_0_R8 -> Q4_0); t itself for the others.
Type plain_type(Type t);

// Rewrites `rows` plain rows of n elements (type plain_type(t), packed) into dst as type t.
// rows: a multiple of 8. dst must not overlap src.
void interleave_rows(Type t, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t n);
// The reverse, for one group: its 8 rows of n elements as plain rows, packed, into dst.
void deinterleave_group(Type t, const uint8_t* group, uint8_t* dst, int64_t n);
// Block b of one group of type t (Q4_0_R8 or Q8_0_R8) as the 8 rows' plain blocks: scales[r]
// (fp16) and the quant bytes of row r in qs[r] (the first 16 for Q4_0_R8, all 32 for Q8_0_R8).
void deinterleave_block(Type t, const uint8_t* group, int64_t b, uint16_t* scales,
                        uint8_t (*qs)[kMaxInterleavedQuantBytes]);

}  // namespace ggl
