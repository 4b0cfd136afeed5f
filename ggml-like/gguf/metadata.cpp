// Metadata: ordered key/value store with typed, checked accessors.
#include <limits>
#include <utility>
#include <type_traits>

#include "ggml-like/gguf/gguf.h"

namespace ggl {

std::string_view value_type_name(ValueType t) {
  static constexpr std::string_view kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                "bool", "string", "array", "u64", "i64", "f64"};
  auto i = static_cast<uint32_t>(t);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

bool Metadata::has(std::string_view key) const { return index_.find(key) != index_.end(); }

const Value* Metadata::find(std::string_view key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

const Value& Metadata::at(std::string_view key) const {
  const Value* v = find(key);
  if (!v) fail("{}: missing metadata key '{}'", source_, key);
  return *v;
}

void Metadata::set(std::string key, Value value) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(key, entries_.size());
  entries_.emplace_back(std::move(key), std::move(value));
}

void Metadata::erase(std::string_view key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(it->second));
  index_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].first, i);
}

namespace {

// What the caller asked for, as it appears in error messages.
template <typename T>
constexpr std::string_view wanted_name() {
  if constexpr (std::is_same_v<T, bool>)
    return "bool";
  else if constexpr (std::is_same_v<T, uint8_t>)
    return "u8";
  else if constexpr (std::is_same_v<T, int8_t>)
    return "i8";
  else if constexpr (std::is_same_v<T, uint16_t>)
    return "u16";
  else if constexpr (std::is_same_v<T, int16_t>)
    return "i16";
  else if constexpr (std::is_same_v<T, uint32_t>)
    return "u32";
  else if constexpr (std::is_same_v<T, int32_t>)
    return "i32";
  else if constexpr (std::is_same_v<T, uint64_t>)
    return "u64";
  else if constexpr (std::is_same_v<T, int64_t>)
    return "i64";
  else if constexpr (std::is_integral_v<T>)
    return "integer";
  else if constexpr (std::is_floating_point_v<T>)
    return "float";
  else if constexpr (std::is_same_v<T, std::string>)
    return "string";
  else
    return "array";
}

enum class Conversion { kOk, kWrongType, kOutOfRange };

// Converts a scalar Value to T when the stored type is compatible and the value fits:
// any integer to any integer type that holds it, f32/f64 to float/double, bool and string only as such.
template <typename T>
Conversion scalar_as(const Value& v, T& out) {
  return std::visit(
      [&](const auto& x) -> Conversion {
        using S = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) {
          if constexpr (std::is_same_v<S, bool>) {
            out = x;
            return Conversion::kOk;
          }
          return Conversion::kWrongType;
        } else if constexpr (std::is_integral_v<T>) {
          if constexpr (std::is_integral_v<S> && !std::is_same_v<S, bool>) {
            if (!std::in_range<T>(x)) return Conversion::kOutOfRange;
            out = static_cast<T>(x);
            return Conversion::kOk;
          }
          return Conversion::kWrongType;
        } else if constexpr (std::is_floating_point_v<T>) {
          if constexpr (std::is_floating_point_v<S>) {
            out = static_cast<T>(x);
            return Conversion::kOk;
          }
          return Conversion::kWrongType;
        } else if constexpr (std::is_same_v<T, std::string>) {
          if constexpr (std::is_same_v<S, std::string>) {
            out = x;
            return Conversion::kOk;
          }
          return Conversion::kWrongType;
        } else {
          return Conversion::kWrongType;
        }
      },
      v.data);
}

// A scalar value as text for an out-of-range message (only integers reach this).
std::string scalar_text(const Value& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using S = std::decay_t<decltype(x)>;
        if constexpr (std::is_integral_v<S> && !std::is_same_v<S, bool>)
          return fmt::format("{}", x);
        else
          return "?";
      },
      v.data);
}

template <typename T>
struct is_vector : std::false_type {};
template <typename E>
struct is_vector<std::vector<E>> : std::true_type {};

}  // namespace

template <typename T>
T Metadata::get(std::string_view key) const {
  const Value& v = at(key);
  T out{};
  if constexpr (is_vector<T>::value) {
    using E = typename T::value_type;
    const Array* arr = std::get_if<Array>(&v.data);
    if (!arr)
      fail("{}: metadata key '{}' is {}, expected an array of {}", source_, key, value_type_name(v.type()),
           wanted_name<E>());
    out.reserve(arr->items.size());
    for (size_t i = 0; i < arr->items.size(); ++i) {
      E e{};
      switch (scalar_as(arr->items[i], e)) {
        case Conversion::kOk: break;
        case Conversion::kWrongType:
          fail("{}: metadata key '{}' is an array of {}, expected an array of {}", source_, key,
               value_type_name(arr->element_type), wanted_name<E>());
        case Conversion::kOutOfRange:
          fail("{}: metadata key '{}' item {} = {} does not fit in {}", source_, key, i, scalar_text(arr->items[i]),
               wanted_name<E>());
      }
      out.push_back(std::move(e));
    }
  } else {
    switch (scalar_as(v, out)) {
      case Conversion::kOk: break;
      case Conversion::kWrongType:
        fail("{}: metadata key '{}' is {}, expected {}", source_, key, value_type_name(v.type()), wanted_name<T>());
      case Conversion::kOutOfRange:
        fail("{}: metadata key '{}' = {} ({}) does not fit in {}", source_, key, scalar_text(v),
             value_type_name(v.type()), wanted_name<T>());
    }
  }
  return out;
}

template uint8_t Metadata::get<uint8_t>(std::string_view) const;
template int8_t Metadata::get<int8_t>(std::string_view) const;
template uint16_t Metadata::get<uint16_t>(std::string_view) const;
template int16_t Metadata::get<int16_t>(std::string_view) const;
template uint32_t Metadata::get<uint32_t>(std::string_view) const;
template int32_t Metadata::get<int32_t>(std::string_view) const;
template uint64_t Metadata::get<uint64_t>(std::string_view) const;
template int64_t Metadata::get<int64_t>(std::string_view) const;
template float Metadata::get<float>(std::string_view) const;
template double Metadata::get<double>(std::string_view) const;
template bool Metadata::get<bool>(std::string_view) const;
template std::string Metadata::get<std::string>(std::string_view) const;
template std::vector<std::string> Metadata::get<std::vector<std::string>>(std::string_view) const;
template std::vector<float> Metadata::get<std::vector<float>>(std::string_view) const;
template std::vector<int32_t> Metadata::get<std::vector<int32_t>>(std::string_view) const;
template std::vector<uint32_t> Metadata::get<std::vector<uint32_t>>(std::string_view) const;
template std::vector<int64_t> Metadata::get<std::vector<int64_t>>(std::string_view) const;
template std::vector<uint64_t> Metadata::get<std::vector<uint64_t>>(std::string_view) const;
template std::vector<uint8_t> Metadata::get<std::vector<uint8_t>>(std::string_view) const;
template std::vector<int8_t> Metadata::get<std::vector<int8_t>>(std::string_view) const;
template std::vector<double> Metadata::get<std::vector<double>>(std::string_view) const;
template std::vector<bool> Metadata::get<std::vector<bool>>(std::string_view) const;

}  // namespace ggl
