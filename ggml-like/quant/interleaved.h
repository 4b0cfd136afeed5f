// Weight rows interleaved 8 at a time, the layout the CPU's decode kernels read fastest
// (cpu/simd/gemm_rows8.h): a product with one activation column then handles 8 rows per vector,
// so each block's activation broadcast, unpacking and scale conversion serve 8 rows instead of
// one. Rewritten from a file's rows once, when a model is loaded; never stored in a file.
//
// Q4_0_R8 / Q8_0_R8: a Q4_0 / Q8_0 matrix in groups of 8 consecutive rows. Per group, per block
// column b (32 weights of each row), 8 blocks' bytes: the 8 rows' fp16 scales, then the rows'
// quant bytes 4 at a time, the quant bytes 4u..4u+3 of row r at (u * 8 + r) * 4 (Q4_0: 16 quant
// bytes a block, whose low nibbles are elements 4u..4u+3 and high nibbles 16+4u..19+4u; Q8_0: 32,
// elements 4u..4u+3). A group takes exactly the bytes of its 8 plain rows, so row strides and
// the start of every group (a multiple of 8 rows) are those of the plain matrix.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "ggml-like/core/types.h"

namespace ggl {

inline constexpr int64_t kInterleavedRows = 8;
// The most quant bytes a plain block of an interleaved type has (Q8_0's).
inline constexpr size_t kMaxInterleavedQuantBytes = kQuantBlock;

// The interleaved type a matrix of type t, n_rows rows, can be rewritten into (Q4_0 -> Q4_0_R8,
// Q8_0 -> Q8_0_R8, where n_rows is a multiple of 8); std::nullopt for the others.
std::optional<Type> interleaved_type(Type t, int64_t n_rows);
bool is_interleaved(Type t);
// The file type an interleaved type rewrites (Q4_0_R8 -> Q4_0); t itself for the others.
Type plain_type(Type t);

// Rewrites `rows` plain rows of n elements (type plain_type(t), packed) into dst as type t.
// rows: a multiple of 8. dst must not overlap src.
void interleave_rows(Type t, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t n);
// The reverse, for one group: its 8 rows of n elements as plain rows, packed, into dst.
void deinterleave_group(Type t, const uint8_t* group, uint8_t* dst, int64_t n);
// Block b of one group of type t as the 8 rows' plain blocks: scales[r] (fp16) and the quant
// bytes of row r in qs[r] (the first 16 for Q4_0_R8, all 32 for Q8_0_R8).
void deinterleave_block(Type t, const uint8_t* group, int64_t b, uint16_t* scales,
                        uint8_t (*qs)[kMaxInterleavedQuantBytes]);

}  // namespace ggl
