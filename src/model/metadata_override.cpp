#include "src/model/metadata_override.h"

#include <charconv>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ggml-like/core/error.h"

namespace latte {
namespace {

int64_t parse_int(const MetadataOverride& o) {
  int64_t v = 0;
  const char* end = o.value.data() + o.value.size();
  const auto [ptr, ec] = std::from_chars(o.value.data(), end, v);
  if (ec != std::errc() || ptr != end || o.value.empty())
    ggl::fail("--override-kv {}: '{}' is not an integer", o.key, o.value);
  return v;
}

float parse_float(const MetadataOverride& o) {
  size_t used = 0;
  float v = 0;
  try {
    v = std::stof(o.value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != o.value.size()) ggl::fail("--override-kv {}: '{}' is not a number", o.key, o.value);
  return v;
}

bool parse_bool(const MetadataOverride& o) {
  if (o.value == "true") return true;
  if (o.value == "false") return false;
  ggl::fail("--override-kv {}: '{}' is not true or false", o.key, o.value);
}

// The override as a value of the stored value's type `like` (nullptr: a new key).
ggl::Value value_of(const MetadataOverride& o, const ggl::Value* like) {
  if (o.type == "str") {
    if (like && !std::holds_alternative<std::string>(like->data))
      ggl::fail("--override-kv {}: the file's value is {}, not a string", o.key, ggl::value_type_name(like->type()));
    return {o.value};
  }
  if (o.type == "bool") {
    if (like && !std::holds_alternative<bool>(like->data))
      ggl::fail("--override-kv {}: the file's value is {}, not a bool", o.key, ggl::value_type_name(like->type()));
    return {parse_bool(o)};
  }
  if (o.type == "float") {
    const float v = parse_float(o);
    if (!like) return {v};
    if (std::holds_alternative<double>(like->data)) return {static_cast<double>(v)};
    if (!std::holds_alternative<float>(like->data))
      ggl::fail("--override-kv {}: the file's value is {}, not a float", o.key, ggl::value_type_name(like->type()));
    return {v};
  }
  const int64_t v = parse_int(o);
  if (!like) return {v};
  return std::visit(
      [&](auto stored) -> ggl::Value {
        using T = decltype(stored);
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
              (v > 0 && static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max())))
            ggl::fail("--override-kv {}: {} does not fit the file's {}", o.key, v, ggl::value_type_name(like->type()));
          return {static_cast<T>(v)};
        } else {
          ggl::fail("--override-kv {}: the file's value is {}, not an integer", o.key,
                    ggl::value_type_name(like->type()));
        }
      },
      like->data);
}

}  // namespace

MetadataOverride parse_metadata_override(std::string_view spec) {
  const size_t eq = spec.find('='), colon = eq == std::string_view::npos ? eq : spec.find(':', eq);
  if (eq == 0 || eq == std::string_view::npos || colon == std::string_view::npos)
    ggl::fail("--override-kv '{}': expected KEY=TYPE:VALUE (TYPE int, float, bool or str)", spec);
  MetadataOverride o{std::string(spec.substr(0, eq)), std::string(spec.substr(eq + 1, colon - eq - 1)),
                     std::string(spec.substr(colon + 1))};
  if (o.type != "int" && o.type != "float" && o.type != "bool" && o.type != "str")
    ggl::fail("--override-kv '{}': type '{}' is not int, float, bool or str", spec, o.type);
  return o;
}

void apply_metadata_overrides(ggl::GgufFile& file, const std::vector<MetadataOverride>& overrides) {
  for (const MetadataOverride& o : overrides) file.override_metadata(o.key, value_of(o, file.metadata().find(o.key)));
}

}  // namespace latte
