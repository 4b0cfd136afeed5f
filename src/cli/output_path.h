// Checks on an output file before any work is done, so a conversion that takes minutes does not
// fail at its very end (the writers publish the file by renaming a temporary one over it), and a
// command never replaces its own input.
#pragma once
#include <string>
#include <string_view>

namespace latte::cli {

// Fails (ggl::Error naming the path) when `output` is a directory or ends in '/', or its
// directory does not exist or cannot be written. `flag` names the setting ("-o", "OUT").
void check_output_path(const std::string& output, std::string_view flag);

// Fails when writing `output` would replace `input` (the same file under any name or link).
void check_not_input(const std::string& output, const std::string& input);

}  // namespace latte::cli
