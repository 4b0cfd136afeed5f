// The chat loop: read an input (line_reader.h), run it as a slash command (chat_commands.h) or
// send it as the user's message and stream the reply to stdout, until /quit, the end of input or
// Ctrl-C twice at an empty prompt.
#pragma once
#include <atomic>
#include <cstdio>
#include <string>

#include "src/chat/chat_session.h"

namespace latte {

struct ReplOptions {
  bool terminal = false;       // stdin and stdout are terminals: libedit, prompts, dimmed reasoning
  bool multiline = false;      // an input is a block of lines up to a blank line
  bool hide_thinking = false;  // leave <think>…</think> spans out of the output
  bool verbose = false;        // one line per turn on stderr: tokens evaluated and generated, speeds
  std::string history_path;    // terminal only
  // Where slash commands answer (/stats, /save, ...): stdout on a terminal, stderr when stdout is
  // piped, so a script reading stdout gets only the replies.
  std::FILE* status = stdout;
};

// `interrupted` is the flag the SIGINT handler sets (src/cli/interrupt.h); the loop clears it after
// a stopped reply or a Ctrl-C at the prompt. Returns the exit code: 130 when Ctrl-C ended the
// chat, 1 when input was piped and a message or command failed (the chat goes on after an error,
// but a script must be able to tell), else 0.
int run_chat_repl(ChatSession& chat, const ReplOptions& options, std::atomic<bool>& interrupted);

}  // namespace latte
