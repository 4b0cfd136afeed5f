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
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
};

// The i-quants whose values are points of a grid (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S; not IQ4_NL / IQ4_XS, which are a 16-level table).
constexpr bool is_grid_iquant(Type t) {
  switch (t) {
    case Type::IQ1_S:
    case Type::IQ1_M:
    case Type::IQ2_XXS:
    case Type::IQ2_XS:
    case Type::IQ2_S:
    case Type::IQ3_XXS:
    case Type::IQ3_S: return true;
    default: return false;
  }
}

// Ids from kFirstBackendLayout on are never in a file: each tags a backend's own in-memory
// arrangement of a file type's blocks (the CPU's interleaved rows, cpu/interleaved.h), which
// only that backend names, writes and reads. backend_layout(file type, n) is a backend's layout
// number n (1, 2, ...; each backend numbers its own) of that type. A layout keeps its file
// type's block size and bytes per block, and traits() answers the file type's (name included),
// so a tensor in a layout has the shape, strides and size of its file tensor: all that core, the
// graph and the other backends know of it.
inline constexpr uint32_t kFirstBackendLayout = 1u << 16;
constexpr Type backend_layout(Type file_type, uint32_t n) {
  return static_cast<Type>(n * kFirstBackendLayout | static_cast<uint32_t>(file_type));
}
constexpr bool is_backend_layout(Type t) { return static_cast<uint32_t>(t) >= kFirstBackendLayout; }
// The file type whose blocks t arranges: t itself for a file type.
constexpr Type file_type_of(Type t) { return static_cast<Type>(static_cast<uint32_t>(t) % kFirstBackendLayout); }

// Dimensions of a tensor (ggml's GGML_MAX_DIMS): ne[0] is the fastest.
inline constexpr int kMaxDims = 4;

inline constexpr int kQuantBlock = 32;   // weights per block for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL
inline constexpr int kSuperBlock = 256;  // weights per super-block for the K-quants, IQ1..IQ3 and IQ4_XS

struct TypeTraits {
  std::string_view name;  // "f32", "q8_0", ... (lower case, as llama.cpp prints them)
  int block_size;         // elements per block (1 for plain types)
  size_t block_bytes;     // bytes per block
  bool quantized;
};

// Traits of a type a file may hold; std::nullopt for an id latte does not know (or a backend layout).
std::optional<TypeTraits> type_traits(uint32_t id);
// ggml's name for a type id latte does not read (e.g. 34 -> "tq1_0", 39 -> "mxfp4"), for error
// messages; std::nullopt where the id is not one ggml ever defined.
std::optional<std::string_view> foreign_type_name(uint32_t id);
// Traits of a known type or of a backend layout (its file type's; precondition: the type is known).
const TypeTraits& traits(Type t);
inline std::string_view type_name(Type t) { return traits(t).name; }
// Parses "f32", "q4_0", ... (case-insensitive) into a file type; std::nullopt if unknown.
std::optional<Type> type_from_name(std::string_view name);

// Bytes of a row of n elements; n must be a multiple of the block size.
inline size_t row_bytes(Type t, int64_t n) {
  const TypeTraits& tr = traits(t);
  return static_cast<size_t>(n / tr.block_size) * tr.block_bytes;
}

}  // namespace ggl
