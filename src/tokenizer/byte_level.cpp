#include "src/tokenizer/byte_level.h"

#include <array>
#include <cstdint>
#include <unordered_map>

#include "src/tokenizer/utf8.h"

namespace latte::byte_level {

namespace {

bool stands_for_itself(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

struct Tables {
  std::array<std::string, 256> byte_to_text;
  std::unordered_map<uint32_t, uint8_t> code_point_to_byte;

  Tables() {
    uint32_t next_moved = 0x100;
    for (int b = 0; b < 256; ++b) {
      uint32_t cp = stands_for_itself(b) ? static_cast<uint32_t>(b) : next_moved++;
      utf8::append(byte_to_text[b], cp);
      code_point_to_byte[cp] = static_cast<uint8_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

std::string encode(std::string_view bytes) {
  const Tables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.byte_to_text[static_cast<uint8_t>(c)];
  return out;
}

std::string decode(std::string_view text) {
  const Tables& t = tables();
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    int n = utf8::valid_char_length(text.substr(i));
    if (n == 0) {  // not UTF-8 at all: keep the byte as it is
      out += text[i++];
      continue;
    }
    auto it = t.code_point_to_byte.find(utf8::decode(text.substr(i)));
    if (it != t.code_point_to_byte.end())
      out += static_cast<char>(it->second);
    else
      out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace latte::byte_level
