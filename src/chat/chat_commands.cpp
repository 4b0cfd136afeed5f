#include "src/chat/chat_commands.h"

#include <fmt/format.h>

#include "ggml-like/core/error.h"
#include "src/chat/chat_persistence.h"
#include "src/parallel/job.h"

namespace latte {
namespace {

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::string mib(size_t bytes) { return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0)); }

}  // namespace

std::string tokens_per_second(int64_t tokens, double seconds) {
  return seconds > 0 && tokens > 0 ? fmt::format("{:.1f} t/s", static_cast<double>(tokens) / seconds) : "- t/s";
}

bool is_chat_command(std::string_view line) { return line.starts_with('/') && !line.starts_with("//"); }

std::string chat_help() {
  return "/help           this list\n"
         "/reset          forget the conversation (the system prompt stays) and clear the cache\n"
         "/system TEXT    set the system prompt (empty TEXT removes it)\n"
         "/save FILE      save the conversation as JSON, and its cache as FILE.cache\n"
         "/load FILE      load a saved conversation (and its cache: no recomputation)\n"
         "/stats          tokens, context use, cache bytes, speed\n"
         "/quit           leave (also Ctrl-D, or Ctrl-C twice at an empty prompt)\n"
         "A line ending in \\ continues on the next line; start a message with // to send a leading /.\n"
         "Ctrl-C stops a reply.\n";
}

std::string chat_stats(const ChatSession& chat) {
  const Conversation& conv = chat.conversation();
  const Session& s = chat.session();
  const int64_t n = static_cast<int64_t>(conv.n_tokens()), cached = s.n_past();
  const size_t per_token = s.cache().bytes_per_token();
  const int64_t system_tokens = conv.has_system() ? static_cast<int64_t>(conv.messages()[0].tokens.size()) : 0;
  std::string out;
  out += fmt::format("conversation: {} messages, {} tokens (system prompt: {} tokens), template {}\n",
                     conv.messages().size(), n, system_tokens, conv.chat_template().name());
  out += fmt::format("context: {} of {} tokens cached ({:.1f}%)\n", cached, s.n_ctx(),
                     100.0 * static_cast<double>(cached) / static_cast<double>(s.n_ctx()));
  out += fmt::format("cache: {} bytes ({}) = {} tokens x {} bytes ({}, {} layers)\n", per_token * cached,
                     mib(per_token * cached), cached, per_token, ggl::type_name(s.cache().type()), s.cache().n_layer());
  if (chat.turns() > 0) {
    const TurnStats& t = chat.last_turn();
    out += fmt::format("last turn: {} new tokens evaluated ({} reused from the cache) at {}; {} generated at {}\n",
                       t.evaluated, t.reused, tokens_per_second(t.evaluated, t.prompt_seconds), t.generated,
                       tokens_per_second(t.generated, t.reply_seconds));
    if (t.dropped_turns > 0)
      out += fmt::format("  dropped {} old turns; {} cached tokens shifted, {} evaluated again\n", t.dropped_turns,
                         t.shifted, t.reevaluated);
  }
  out += fmt::format("session: {} turns, {} tokens evaluated, {} generated; seed {}\n", chat.turns(),
                     chat.total_evaluated(), chat.total_generated(), chat.sampler().seed());
  return out;
}

CommandOutcome run_chat_command(std::string_view line, ChatSession& chat, std::FILE* out) {
  const size_t space = line.find_first_of(" \t");
  const std::string_view name = line.substr(0, space);
  const std::string_view arg = space == std::string_view::npos ? std::string_view() : trim(line.substr(space));
  auto print = [out](const std::string& s) {
    std::fputs(s.c_str(), out);
    std::fflush(out);
  };
  auto need_arg = [&](const char* what) {
    if (arg.empty()) ggl::fail("{} needs {}", name, what);
  };

  if (name == "/help" || name == "/?") {
    print(chat_help());
  } else if (name == "/quit" || name == "/exit") {
    return CommandOutcome::kQuit;
  } else if (name == "/reset") {
    chat.reset();
    print(chat.conversation().has_system() ? "conversation cleared (system prompt kept)\n" : "conversation cleared\n");
  } else if (name == "/system") {
    chat.set_system(std::string(arg));
    print(arg.empty() ? "system prompt removed\n" : "system prompt set\n");
  } else if (name == "/stats") {
    print(chat_stats(chat));
  } else if (name == "/save") {
    need_arg("a file name");
    if (Job::get().rank() != 0) return CommandOutcome::kContinue;  // under mpirun rank 0 writes, for every rank
    const SaveReport r = save_chat(chat, std::string(arg));
    print(fmt::format("saved {} messages ({} tokens) to {}", r.messages, r.tokens, arg));
    if (r.cache_tokens > 0)
      print(fmt::format("; cache of {} tokens to {}: {} bytes ({} of rows + {} of header)", r.cache_tokens,
                        r.cache_path, r.cache_bytes, r.row_bytes, r.cache_bytes - r.row_bytes));
    print("\n");
  } else if (name == "/load") {
    need_arg("a file name");
    const LoadReport r = load_chat(chat, std::string(arg));
    print(fmt::format("loaded {} messages ({} tokens) from {}", r.messages, r.tokens, arg));
    if (r.cache_tokens > 0)
      print(
          fmt::format("; cache of {} tokens restored ({} bytes), nothing to recompute", r.cache_tokens, r.cache_bytes));
    print("\n");
    if (!r.note.empty()) print("note: " + r.note + "\n");
  } else {
    ggl::fail("unknown command {} (/help lists them)", name);
  }
  return CommandOutcome::kContinue;
}

}  // namespace latte
