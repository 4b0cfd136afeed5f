// A string test the converter's files share (C++20's strings have starts_with and ends_with, but
// contains only comes with C++23).
#pragma once
#include <string_view>

namespace latte::convert {

inline bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

}  // namespace latte::convert
