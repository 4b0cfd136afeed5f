// GPT-2 style byte-level alphabet: every byte 0..255 is shown as one printable Unicode character,
// so that byte-level BPE vocabularies and merges can be stored as text. Printable Latin-1 bytes
// ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for themselves; the other 68 bytes are moved
// to U+0100 and up, in byte order (so ' ' becomes 'Ġ' U+0120 and '\n' becomes 'Ċ' U+010A).
#pragma once
#include <string>
#include <string_view>

namespace latte::byte_level {

// The byte-level text of raw bytes (each byte becomes one 1- or 2-byte UTF-8 character).
std::string encode(std::string_view bytes);

// The raw bytes of byte-level text. A character outside the alphabet (possible in added tokens)
// is kept as its own UTF-8 bytes.
std::string decode(std::string_view text);

}  // namespace latte::byte_level
