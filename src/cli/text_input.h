// Reading the text a command is given: a file named by a flag (-f, --tokens) and llama.cpp's
// conventions for prompt text (escape sequences, the file's last newline).
#pragma once
#include <string>
#include <string_view>

namespace latte::cli {

// The whole file. A missing path, a directory or an unreadable file is a ggl::Error naming the
// path and saying which ("{path}: is a directory, not a prompt file"); `what` is "prompt file".
std::string read_text_file(const std::string& path, std::string_view what);

// Drops one trailing '\n', as llama.cpp does for -f, so `-f FILE` and `-p "$(cat FILE)"` give the
// same prompt (editors end files with a newline the text does not mean).
std::string without_final_newline(std::string text);

// llama.cpp's -e (on by default): \n \t \r \\ \" \' and \xNN (two hex digits) become the
// characters they name; any other backslash is kept as it is.
std::string process_escapes(std::string_view text);

}  // namespace latte::cli
