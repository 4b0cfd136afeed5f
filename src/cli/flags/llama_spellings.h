// llama.cpp's spellings of the flags latte has under another name, so command lines written for
// llama-cli / llama-bench work unchanged. Many are single-dash multi-letter names (-ngl, -fa,
// -no-cnv), which CLI11 would otherwise split into a short flag plus a value ("-n gl").
#pragma once
#include <span>
#include <string_view>

namespace latte::cli {

struct LlamaSpelling {
  std::string_view llama;       // as typed on a llama.cpp command line
  std::string_view latte;       // the latte option it stands for
  std::string_view bare_value;  // the value implied when none follows (old llama.cpp's bare -fa), or ""
};

std::span<const LlamaSpelling> llama_spellings();

// The entry for a flag as typed, or nullptr.
const LlamaSpelling* find_llama_spelling(std::string_view typed);

}  // namespace latte::cli
