// Helpers shared by the GGUF suites.
#pragma once
#include <cstring>
#include <type_traits>
#include <variant>

#include "ggml-like/gguf/gguf.h"

namespace latte::testing {

// Exact equality of metadata values, floats compared bit for bit (so NaN payloads and -0.0 count).
inline bool same_value(const ggl::Value& a, const ggl::Value& b) {
  if (a.type() != b.type()) return false;
  return std::visit(
      [&](const auto& x) -> bool {
        using S = std::decay_t<decltype(x)>;
        const S& y = std::get<S>(b.data);
        if constexpr (std::is_same_v<S, ggl::Array>) {
          if (x.element_type != y.element_type || x.items.size() != y.items.size()) return false;
          for (size_t i = 0; i < x.items.size(); ++i)
            if (!same_value(x.items[i], y.items[i])) return false;
          return true;
        } else if constexpr (std::is_floating_point_v<S>) {
          return std::memcmp(&x, &y, sizeof x) == 0;
        } else {
          return x == y;
        }
      },
      a.data);
}

}  // namespace latte::testing
