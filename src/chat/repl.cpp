#include "src/chat/repl.h"

#include <fmt/format.h>

#include <cstdio>

#include "ggml-like/core/error.h"
#include "src/chat/chat_commands.h"
#include "src/chat/line_reader.h"
#include "src/chat/thinking_filter.h"
#include "src/parallel/job.h"

namespace latte {
namespace {

constexpr const char* kDim = "\x1b[2m";
constexpr const char* kUndim = "\x1b[22m";

void write_out(std::string_view s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

void note(std::string_view s) { std::fprintf(stderr, "[%.*s]\n", static_cast<int>(s.size()), s.data()); }

// Writes a streamed reply: reasoning spans dimmed (terminal), hidden, or as they are (pipe); for
// chat templates the whitespace that opens the reply is dropped.
class ReplyPrinter {
 public:
  ReplyPrinter(const ReplOptions& o, bool trim_leading) : o_(o), trim_(trim_leading) {}

  void operator()(std::string_view text, bool thinking) {
    if (thinking && o_.hide_thinking) return;
    if (trim_ && !started_) {
      text.remove_prefix(std::min(text.size(), text.find_first_not_of(" \t\r\n")));
      if (text.empty()) return;
    }
    started_ = true;
    if (o_.terminal && thinking != dimmed_) {
      write_out(thinking ? kDim : kUndim);
      dimmed_ = thinking;
    }
    write_out(text);
  }
  // Every reply ends with a newline, an empty one included, so a script reading the output sees
  // one terminated reply per message.
  void finish() {
    if (dimmed_) write_out(kUndim);
    write_out("\n");
  }

 private:
  const ReplOptions& o_;
  bool trim_;
  bool started_ = false;
  bool dimmed_ = false;
};

void respond(ChatSession& chat, std::string text, const ReplOptions& o, std::atomic<bool>& interrupted) {
  const ChatTemplate& t = chat.conversation().chat_template();
  ReplyPrinter printer(o, &t != &ChatTemplate::plain());
  ThinkingFilter filter([&printer](std::string_view s, bool thinking) { printer(s, thinking); }, t.starts_thinking());
  const TurnStats s = chat.respond(
      std::move(text), &interrupted, [&filter](std::string_view piece) { filter.push(piece); }, note);
  filter.flush();
  printer.finish();
  if (s.reason == StopReason::kInterrupted) {
    note("reply stopped");
    interrupted.store(false);
  } else if (s.reason == StopReason::kContextFull) {
    note("context full: reply cut short (/reset, or raise -c)");
  }
  if (o.verbose)
    std::fprintf(
        stderr, "%s\n",
        fmt::format("[turn {}: {} new tokens evaluated, {} reused from the cache, {} generated; {} prompt, "
                    "{} reply]",
                    chat.turns(), s.evaluated, s.reused, s.generated, tokens_per_second(s.evaluated, s.prompt_seconds),
                    tokens_per_second(s.generated, s.reply_seconds))
            .c_str());
}

// The next input. Under mpirun only rank 0 has the user (mpirun gives stdin to rank 0): it reads,
// and every rank gets what it read, so that the ranks take the same turns.
LineReader::Result next_input(LineReader& reader, std::string& text, const std::atomic<bool>& interrupted) {
  Job& job = Job::get();
  LineReader::Result r = LineReader::Result::kEnd;
  if (job.rank() == 0) r = reader.read(text, interrupted);
  if (job.alone()) return r;
  const std::string shared = job.text_from_rank0(static_cast<char>(r) + (r == LineReader::Result::kText ? text : ""));
  text = shared.substr(1);
  return static_cast<LineReader::Result>(shared[0]);
}

}  // namespace

int run_chat_repl(ChatSession& chat, const ReplOptions& options, std::atomic<bool>& interrupted) {
  LineReader reader({.terminal = options.terminal, .blocks = options.multiline, .history_path = options.history_path});
  bool interrupted_at_prompt = false, failed = false, quit_by_interrupt = false;
  std::string text;
  while (true) {
    const LineReader::Result r = next_input(reader, text, interrupted);
    if (r == LineReader::Result::kCancelled) {
      interrupted.store(false);
      interrupted_at_prompt = false;
      continue;
    }
    if (r == LineReader::Result::kInterrupted) {
      interrupted.store(false);
      if (interrupted_at_prompt || !options.terminal) {
        quit_by_interrupt = true;
        break;
      }
      interrupted_at_prompt = true;
      std::fputs("(Ctrl-C again or Ctrl-D to quit)\n", stderr);
      continue;
    }
    interrupted_at_prompt = false;
    if (r == LineReader::Result::kEnd) break;
    interrupted.store(false);  // a Ctrl-C while the user was typing must not stop the coming reply
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) continue;
    try {
      if (is_chat_command(text)) {
        if (run_chat_command(text, chat, options.status) == CommandOutcome::kQuit) break;
        continue;
      }
      if (text.starts_with("//")) text.erase(0, 1);
      respond(chat, std::move(text), options, interrupted);
    } catch (const ggl::Error& e) {
      if (Job::get().rank() == 0) std::fprintf(stderr, "error: %s\n", e.what());  // (every rank has it)
      failed = true;
    }
  }
  if (quit_by_interrupt) return 130;
  return failed && !options.terminal ? 1 : 0;
}

}  // namespace latte
