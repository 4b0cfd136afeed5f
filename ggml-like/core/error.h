// The one error type of the tensor library: a one-line, human-readable message.
// Callers (the CLI) print what() and exit non-zero; nothing in the library aborts on bad input.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace ggl {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// A name or key taken from a file, made safe for a one-line message: bytes outside printable
// ASCII (and backslashes) as \xNN, cut after 80 bytes with the full length noted.
inline std::string printable(std::string_view s) {
  constexpr size_t kMaxShown = 80;
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\')
      out += static_cast<char>(c);
    else
      out += fmt::format("\\x{:02x}", c);
  }
  if (s.size() > kMaxShown) out += fmt::format("...({} bytes)", s.size());
  return out;
}

}  // namespace ggl
