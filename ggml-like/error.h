// The one error type of the tensor library: a one-line, human-readable message.
// Callers (the CLI) print what() and exit non-zero; nothing in the library aborts on bad input.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace ggl {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace ggl
