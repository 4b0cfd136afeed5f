#include "ggml-like/core/types.h"

#include <array>
#include <cctype>
#include <string>

namespace ggl {
namespace {

struct Entry {
  Type type;
  TypeTraits traits;
};

constexpr std::array<Entry, 11> kTypes = {{
    {Type::F32, {"f32", 1, 4, false}},
    {Type::F16, {"f16", 1, 2, false}},
    {Type::Q4_0, {"q4_0", kQuantBlock, 2 + kQuantBlock / 2, true}},
    {Type::Q4_1, {"q4_1", kQuantBlock, 2 + 2 + kQuantBlock / 2, true}},
    {Type::Q8_0, {"q8_0", kQuantBlock, 2 + kQuantBlock, true}},
    {Type::I8, {"i8", 1, 1, false}},
    {Type::I16, {"i16", 1, 2, false}},
    {Type::I32, {"i32", 1, 4, false}},
    {Type::I64, {"i64", 1, 8, false}},
    {Type::F64, {"f64", 1, 8, false}},
    {Type::BF16, {"bf16", 1, 2, false}},
}};

}  // namespace

std::optional<TypeTraits> type_traits(uint32_t id) {
  for (const Entry& e : kTypes)
    if (static_cast<uint32_t>(e.type) == id) return e.traits;
  return std::nullopt;
}

const TypeTraits& traits(Type t) {
  for (const Entry& e : kTypes)
    if (e.type == t) return e.traits;
  return kTypes[0].traits;  // unreachable for valid enum values
}

std::optional<Type> type_from_name(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const Entry& e : kTypes)
    if (e.traits.name == lower) return e.type;
  return std::nullopt;
}

}  // namespace ggl
