// The REPL's slash commands: /help, /reset, /system TEXT, /save FILE, /load FILE, /stats, /quit.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>

#include "src/chat/chat_session.h"

namespace latte {

enum class CommandOutcome { kContinue, kQuit };

// Whether an input line is a command (starts with '/', but not "//", which sends the text with
// one '/' less).
bool is_chat_command(std::string_view line);

// Runs one command line, printing its answer to out. Throws ggl::Error for an unknown command, a
// missing argument or a failed save/load.
CommandOutcome run_chat_command(std::string_view line, ChatSession& chat, std::FILE* out);

std::string chat_help();

// The /stats text: conversation size, context use, cache bytes, last turn and session totals.
std::string chat_stats(const ChatSession& chat);

// "123.4 t/s", or "- t/s" when nothing was timed.
std::string tokens_per_second(int64_t tokens, double seconds);

}  // namespace latte
