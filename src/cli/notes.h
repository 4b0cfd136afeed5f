// One-line notes and warnings on stderr ("latte run: note: ..."): what a command did with a flag
// it accepted but does not act on, or a setting likely to give poor results. --log-disable
// (llama.cpp's flag) silences them along with the run summary; errors are always printed.
#pragma once
#include <string_view>

namespace latte::cli {

void set_log_disabled(bool disabled);
bool log_enabled();

// `prog` is the command ("latte run"), as in the error lines.
void note(std::string_view prog, std::string_view text);
void warning(std::string_view prog, std::string_view text);

}  // namespace latte::cli
