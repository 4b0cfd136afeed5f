// Flag parsing shared by every subcommand: --help prints and ends the command successfully, and a
// bad flag becomes the one-line error every latte command reports (not CLI11's two-line message).
#pragma once
#include <CLI/CLI.hpp>

#include <optional>

#include "ggml-like/core/error.h"

namespace latte::cli {

// Returns the exit code when the command is done (--help), std::nullopt when it should go on.
// Throws ggl::Error for a flag CLI11 rejects.
inline std::optional<int> parse_flags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    ggl::fail("{}", e.what());
  }
  return std::nullopt;
}

}  // namespace latte::cli
