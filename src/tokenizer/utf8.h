// Small UTF-8 helpers shared by the tokenizers and the streaming detokenizer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace latte::utf8 {

// Length of the sequence a lead byte announces (1..4), or 0 for a byte that cannot start one
// (a continuation byte 0x80..0xBF, or 0xC0, 0xC1, 0xF5..0xFF).
int sequence_length(uint8_t lead);

// Length of the valid UTF-8 character starting at s[0] (1..4), or 0 if s does not start with a
// complete, valid, shortest-form character (an empty view also gives 0).
int valid_char_length(std::string_view s);

// True when all of s is a proper prefix of a valid character, i.e. it could still become one if
// more bytes followed. Used to hold back a character split across tokens.
bool is_incomplete_prefix(std::string_view s);

// For s not starting with a valid character: how many bytes to replace by one U+FFFD (the
// "maximal subpart" rule of Unicode: the longest prefix that could have started a character, at
// least 1). Returns 0 for an empty view.
int invalid_prefix_length(std::string_view s);

// The first code point of a valid character (call only after valid_char_length(s) > 0).
uint32_t decode(std::string_view s);

// Appends the UTF-8 encoding of a code point (<= 0x10FFFF, not a surrogate).
void append(std::string& out, uint32_t code_point);

// The replacement character U+FFFD, emitted for bytes that can never form a character.
inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

}  // namespace latte::utf8
