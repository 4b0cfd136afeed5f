#include "src/placement/byte_size.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

namespace latte {

std::optional<size_t> parse_byte_size(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.'))
    ++digits;
  if (digits == 0) return std::nullopt;
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + digits, value);
  if (ec != std::errc() || end != text.data() + digits) return std::nullopt;
  std::string unit(text.substr(digits));
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() > 1 && (unit.substr(1) == "B" || unit.substr(1) == "IB")) unit.resize(1);
  int power = 0;
  if (unit == "B" || unit.empty())
    power = 0;
  else if (unit == "K")
    power = 1;
  else if (unit == "M")
    power = 2;
  else if (unit == "G")
    power = 3;
  else if (unit == "T")
    power = 4;
  else
    return std::nullopt;
  const double bytes = value * std::pow(1024.0, power);
  if (!std::isfinite(bytes) || bytes >= 0x1p63) return std::nullopt;
  return static_cast<size_t>(std::llround(bytes));
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  return u == 0 ? fmt::format("{:.0f} {}", bytes, units[u]) : fmt::format("{:.2f} {}", bytes, units[u]);
}

}  // namespace latte
