// Tensor element types with the exact ggml numbering and block layouts.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ggl {

// Values are ggml's type ids as stored in GGUF tensor infos.
enum class Type : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,  // activation format of the K-quant integer dot products (float scale, bsums)
  IQ4_NL = 20,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
  // latte's own in-memory layouts, never read from or written to a file (ids from
  // kFirstInternalType on): Q4_0, Q8_0 and Q6_K with 8 rows interleaved for the CPU's decode
  // kernels (cpu/interleaved.h).
  Q4_0_R8 = (1u << 16) | 2,
  Q8_0_R8 = (1u << 16) | 8,
  Q6_K_R8 = (1u << 16) | 14,
};
inline constexpr uint32_t kFirstInternalType = 1u << 16;

// Dimensions of a tensor (ggml's GGML_MAX_DIMS): ne[0] is the fastest.
inline constexpr int kMaxDims = 4;

inline constexpr int kQuantBlock = 32;   // weights per block for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL
inline constexpr int kSuperBlock = 256;  // weights per super-block for the K-quants and IQ4_XS

struct TypeTraits {
  std::string_view name;   // "f32", "q8_0", ... (lower case, as llama.cpp prints them)
  int block_size;          // elements per block (1 for plain types)
  size_t block_bytes;      // bytes per block
  bool quantized;
};

// Traits of a type a file may hold; std::nullopt for an id latte does not know (or an internal one).
std::optional<TypeTraits> type_traits(uint32_t id);
// ggml's name for a type id latte does not read (e.g. 16 -> "iq2_xxs", 39 -> "mxfp4"), for error
// messages; std::nullopt where the id is not one ggml ever defined.
std::optional<std::string_view> foreign_type_name(uint32_t id);
// Traits of a known type (precondition: the type is known).
const TypeTraits& traits(Type t);
inline std::string_view type_name(Type t) { return traits(t).name; }
// Parses "f32", "q4_0", ... (case-insensitive); std::nullopt if unknown or internal.
std::optional<Type> type_from_name(std::string_view name);

// Bytes of a row of n elements; n must be a multiple of the block size.
inline size_t row_bytes(Type t, int64_t n) {
  const TypeTraits& tr = traits(t);
  return static_cast<size_t>(n / tr.block_size) * tr.block_bytes;
}

}  // namespace ggl
