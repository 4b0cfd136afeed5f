#include "ggml-like/core/types.h"

#include <array>
#include <cctype>
#include <string>
#include <utility>

namespace ggl {
namespace {

struct Entry {
  Type type;
  TypeTraits traits;
};

// Block bytes follow ggml's block structs: fp16 scales (d, and dmin / m where the type has mins),
// packed sub-block scales, high bits, then the low bits of the quants.
constexpr std::array<Entry, 28> kTypes = {{
    {Type::F32, {"f32", 1, 4, false}},
    {Type::F16, {"f16", 1, 2, false}},
    {Type::Q4_0, {"q4_0", kQuantBlock, 2 + kQuantBlock / 2, true}},
    {Type::Q4_1, {"q4_1", kQuantBlock, 2 + 2 + kQuantBlock / 2, true}},
    {Type::Q5_0, {"q5_0", kQuantBlock, 2 + 4 + kQuantBlock / 2, true}},
    {Type::Q5_1, {"q5_1", kQuantBlock, 2 + 2 + 4 + kQuantBlock / 2, true}},
    {Type::Q8_0, {"q8_0", kQuantBlock, 2 + kQuantBlock, true}},
    {Type::Q2_K, {"q2_K", kSuperBlock, kSuperBlock / 16 + kSuperBlock / 4 + 2 + 2, true}},
    {Type::Q3_K, {"q3_K", kSuperBlock, kSuperBlock / 8 + kSuperBlock / 4 + 12 + 2, true}},
    {Type::Q4_K, {"q4_K", kSuperBlock, 2 + 2 + 12 + kSuperBlock / 2, true}},
    {Type::Q5_K, {"q5_K", kSuperBlock, 2 + 2 + 12 + kSuperBlock / 8 + kSuperBlock / 2, true}},
    {Type::Q6_K, {"q6_K", kSuperBlock, kSuperBlock / 2 + kSuperBlock / 4 + kSuperBlock / 16 + 2, true}},
    {Type::Q8_K, {"q8_K", kSuperBlock, 4 + kSuperBlock + kSuperBlock / 16 * 2, true}},
    {Type::IQ4_NL, {"iq4_nl", kQuantBlock, 2 + kQuantBlock / 2, true}},
    {Type::IQ4_XS, {"iq4_xs", kSuperBlock, 2 + 2 + kSuperBlock / 64 + kSuperBlock / 2, true}},
    // The i-quants below 4 bits: grid indices (qs, with high bits in qh), signs, sub-block scales.
    {Type::IQ2_XXS, {"iq2_xxs", kSuperBlock, 2 + kSuperBlock / 4, true}},
    {Type::IQ2_XS, {"iq2_xs", kSuperBlock, 2 + kSuperBlock / 4 + kSuperBlock / 32, true}},
    {Type::IQ2_S, {"iq2_s", kSuperBlock, 2 + kSuperBlock / 4 + kSuperBlock / 32 + kSuperBlock / 32, true}},
    {Type::IQ3_XXS, {"iq3_xxs", kSuperBlock, 2 + 3 * kSuperBlock / 8, true}},
    {Type::IQ3_S,
     {"iq3_s", kSuperBlock, 2 + kSuperBlock / 4 + kSuperBlock / 32 + kSuperBlock / 8 + kSuperBlock / 64, true}},
    {Type::IQ1_S, {"iq1_s", kSuperBlock, 2 + kSuperBlock / 8 + kSuperBlock / 16, true}},
    {Type::IQ1_M, {"iq1_m", kSuperBlock, kSuperBlock / 8 + kSuperBlock / 16 + kSuperBlock / 32, true}},
    {Type::I8, {"i8", 1, 1, false}},
    {Type::I16, {"i16", 1, 2, false}},
    {Type::I32, {"i32", 1, 4, false}},
    {Type::I64, {"i64", 1, 8, false}},
    {Type::F64, {"f64", 1, 8, false}},
    {Type::BF16, {"bf16", 1, 2, false}},
}};

// ggml's types that latte does not read, by id (ids 4, 5 and 31-33, 36-38 were retired by ggml).
constexpr std::array<std::pair<uint32_t, std::string_view>, 4> kForeignTypes = {{
    {9, "q8_1"},
    {34, "tq1_0"},
    {35, "tq2_0"},
    {39, "mxfp4"},
}};

}  // namespace

std::optional<std::string_view> foreign_type_name(uint32_t id) {
  for (const auto& [foreign_id, name] : kForeignTypes)
    if (foreign_id == id) return name;
  return std::nullopt;
}

std::optional<TypeTraits> type_traits(uint32_t id) {
  for (const Entry& e : kTypes)
    if (static_cast<uint32_t>(e.type) == id) return e.traits;
  return std::nullopt;
}

const TypeTraits& traits(Type t) {
  t = file_type_of(t);
  for (const Entry& e : kTypes)
    if (e.type == t) return e.traits;
  return kTypes[0].traits;  // unreachable for valid enum values
}

std::optional<Type> type_from_name(std::string_view name) {
  // Case-insensitive on both sides: ggml spells the K-quants with a capital K ("q4_K").
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  const std::string wanted = lower(name);
  for (const Entry& e : kTypes)
    if (lower(e.traits.name) == wanted) return e.type;
  return std::nullopt;
}

}  // namespace ggl
