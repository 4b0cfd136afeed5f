#include "src/cli/text_input.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ggml-like/core/error.h"

namespace latte::cli {

std::string read_text_file(const std::string& path, std::string_view what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) ggl::fail("{}: no such {}", path, what);
  if (fs::is_directory(st)) ggl::fail("{}: is a directory, not a {}", path, what);
  std::ifstream in(path, std::ios::binary);
  if (!in) ggl::fail("{}: cannot open the {} ({})", path, what, std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) ggl::fail("{}: cannot read the {} ({})", path, what, std::strerror(errno));
  return s.str();
}

std::string without_final_newline(std::string text) {
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

std::string process_escapes(std::string_view text) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    const char c = text[i + 1];
    switch (c) {
      case 'n':
        out += '\n';
        ++i;
        continue;
      case 't':
        out += '\t';
        ++i;
        continue;
      case 'r':
        out += '\r';
        ++i;
        continue;
      case '\\':
      case '"':
      case '\'':
        out += c;
        ++i;
        continue;
      case 'x':
        if (i + 3 < text.size() && hex(text[i + 2]) >= 0 && hex(text[i + 3]) >= 0) {
          out += static_cast<char>(hex(text[i + 2]) * 16 + hex(text[i + 3]));
          i += 3;
          continue;
        }
        break;
      default: break;
    }
    out += '\\';  // not an escape: the backslash stays, the next character is copied next round
  }
  return out;
}

}  // namespace latte::cli
