// Byte sizes as people type and read them: "12G", "512M", "1.5GiB" in; "4.25 GiB" out.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace latte {

// A size with an optional unit K, M, G, T (also KB/KiB/...; powers of 1024) or none (bytes).
// nullopt for anything else: negative, empty, no digits, an unknown unit, or too large.
std::optional<size_t> parse_byte_size(std::string_view text);

// "0 B", "812 B", "1.50 KiB", "4.25 GiB".
std::string format_bytes(double bytes);

}  // namespace latte
