// CLI11 validators for numeric flags whose messages say plainly what is wrong, without CLI11's
// "Value 0 not in range 0.000000 to 1797693..." (DBL_MAX) wording. parse_flags() puts the flag,
// as the user typed it, in front: "-c must be >= 1 (got 0)", "-n: 'abc' is not an integer".
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace latte::cli {

// A whole number (decimal, optional sign) in [min, max].
CLI::Validator integer(int64_t min = std::numeric_limits<int64_t>::min(),
                       int64_t max = std::numeric_limits<int64_t>::max());

// A finite real number; its range is checked where it is used (e.g. SamplingParams::validate).
CLI::Validator real();

// A comma-separated list of whole numbers in [min, the type's max] (bench's -p 512,1024,
// batched-bench's -npl 1,4,16).
template <class T>
CLI::Option* add_integer_list(CLI::App& app, const std::string& name, std::vector<T>& values, const std::string& help,
                              int64_t min) {
  return app.add_option(name, values, help)->delimiter(',')->check(integer(min, std::numeric_limits<T>::max()));
}

}  // namespace latte::cli
