// The flags about the text given to `latte run` and `latte chat` that llama.cpp users expect:
// -e/--escape (the default) and --no-escape for -p and -sys, and llama-cli's -cnv/-no-cnv, which
// pick between what are two commands in latte (run completes a text, chat holds a conversation).
#pragma once
#include <CLI/CLI.hpp>

#include <string>

namespace latte::cli {

struct PromptFlags {
  bool escape = false;  // -e: the default already; accepted for llama.cpp command lines
  bool no_escape = false;
  bool conversation = false, no_conversation = false;

  void add_to(CLI::App& app);
  // The text of -p / -sys with escape sequences processed (unless --no-escape).
  std::string text(const std::string& typed) const;
  // Refuses the mode the command is not: -cnv for run, -no-cnv for chat (naming the other command).
  void check_mode(const CLI::App& app, bool is_chat) const;
};

}  // namespace latte::cli
