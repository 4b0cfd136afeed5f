// Flag parsing shared by every subcommand: llama.cpp's spellings are mapped onto latte's
// (llama_spellings.h), an unknown flag is named exactly as typed, --help prints and ends the
// command successfully, and a bad flag becomes the one-line error every latte command reports
// (naming the flag as the user typed it, not CLI11's two-line message).
#pragma once
#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace latte::cli {

// Returns the exit code when the command is done (--help), std::nullopt when it should go on.
// Throws ggl::Error for a flag that is unknown or that CLI11 rejects.
std::optional<int> parse_flags(CLI::App& app, int argc, char** argv);

// The spelling the user typed for the option called `name` in `app` ("-c" for "--ctx-size",
// "-ngl" for "--n-gpu-layers"), or `name` itself when the option was not given. For messages
// about a flag's value after parsing.
std::string typed_flag(const CLI::App& app, std::string_view name);

}  // namespace latte::cli
