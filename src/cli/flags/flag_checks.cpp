#include "src/cli/flags/flag_checks.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <string>
#include <string_view>

namespace latte::cli {
namespace {

// The error for one item, or "" when it is a whole number in range.
std::string check_integer(std::string_view s, int64_t min, int64_t max) {
  int64_t v = 0;
  std::string_view digits = s;
  if (digits.starts_with('+')) digits.remove_prefix(1);  // from_chars takes '-' but not '+'
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || end != digits.data() + digits.size() || ec == std::errc::invalid_argument)
    return fmt::format("'{}' is not an integer", s);
  if (ec == std::errc::result_out_of_range) return fmt::format("'{}' is out of range", s);
  // Only the bound that was crossed: "-t must be >= 0 (got -1)".
  if (v < min) return fmt::format("must be >= {} (got {})", min, v);
  if (v > max) return fmt::format("must be <= {} (got {})", max, v);
  return {};
}

}  // namespace

CLI::Validator integer(int64_t min, int64_t max) {
  return CLI::Validator([min, max](std::string& s) { return check_integer(s, min, max); }, "");
}

CLI::Validator real() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        size_t used = 0;
        double v = 0;
        try {
          v = std::stod(s, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (s.empty() || used != s.size() || !std::isfinite(v)) return fmt::format("'{}' is not a number", s);
        return {};
      },
      "");
}

}  // namespace latte::cli
