#include "src/tokenizer/utf8.h"

namespace latte::utf8 {

int sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;  // continuation byte, or an overlong 2-byte lead
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

namespace {

// The allowed range of the second byte depends on the lead byte: this is what rules out
// overlong forms, surrogates (ED A0..BF) and code points above U+10FFFF (F4 90..).
bool second_byte_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
  }
}

bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Number of leading bytes of s (at most the announced length) that are consistent with a valid
// sequence; returns the announced length n when all n bytes are present and valid.
int consistent_prefix(std::string_view s, int& n) {
  n = s.empty() ? 0 : sequence_length(static_cast<uint8_t>(s[0]));
  if (n == 0) return 0;
  int have = 1;
  for (int i = 1; i < n && i < static_cast<int>(s.size()); ++i) {
    uint8_t b = static_cast<uint8_t>(s[i]);
    bool ok = i == 1 ? second_byte_ok(static_cast<uint8_t>(s[0]), b) : is_continuation(b);
    if (!ok) break;
    ++have;
  }
  return have;
}

}  // namespace

int valid_char_length(std::string_view s) {
  int n = 0;
  int have = consistent_prefix(s, n);
  return n > 0 && have == n ? n : 0;
}

bool is_incomplete_prefix(std::string_view s) {
  int n = 0;
  int have = consistent_prefix(s, n);
  return n > 0 && have == static_cast<int>(s.size()) && have < n;
}

int invalid_prefix_length(std::string_view s) {
  if (s.empty()) return 0;
  int n = 0;
  int have = consistent_prefix(s, n);
  return have > 0 ? have : 1;
}

uint32_t decode(std::string_view s) {
  auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(s[i])); };
  switch (sequence_length(static_cast<uint8_t>(s[0]))) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace latte::utf8
