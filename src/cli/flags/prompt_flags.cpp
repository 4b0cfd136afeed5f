#include "src/cli/flags/prompt_flags.h"

#include "ggml-like/core/error.h"
#include "src/cli/flags/parse_flags.h"
#include "src/cli/text_input.h"

namespace latte::cli {

void PromptFlags::add_to(CLI::App& app) {
  app.add_flag("-e,--escape", escape, "process escapes (\\n \\t \\r \\\\ \\\" \\' \\xNN) in -p and -sys (default)");
  app.add_flag("--no-escape", no_escape, "take -p and -sys literally (wins over -e)");
  app.add_flag("--conversation", conversation, "-cnv: llama-cli's conversation mode, which is latte chat")
      ->group("llama.cpp flags");
  app.add_flag("--no-conversation", no_conversation, "-no-cnv: llama-cli's plain completion, which is latte run")
      ->group("llama.cpp flags");
}

std::string PromptFlags::text(const std::string& typed) const { return no_escape ? typed : process_escapes(typed); }

void PromptFlags::check_mode(const CLI::App& app, bool is_chat) const {
  if (conversation && !is_chat)
    ggl::fail("{}: latte run completes a text; for a conversation use latte chat", typed_flag(app, "--conversation"));
  if (no_conversation && is_chat)
    ggl::fail("{}: latte chat is always a conversation; for a plain completion use latte run",
              typed_flag(app, "--no-conversation"));
}

}  // namespace latte::cli
