// User input for the chat REPL. On a terminal: line editing and history with libedit (history
// kept in a file across sessions). Otherwise (piped stdin): plain lines, no prompt, so scripts
// and tests can drive the chat.
//
// One input is one line; a line ending in '\' continues on the next one (joined with '\n'). With
// `blocks`, an input is every line up to a blank line (or the end).
#pragma once
#include <atomic>
#include <string>

typedef struct editline EditLine;
typedef struct history History;

namespace latte {

class LineReader {
 public:
  struct Options {
    bool terminal = false;     // use libedit (stdin and stdout are terminals)
    bool blocks = false;       // --multiline
    std::string history_path;  // terminal only; "" keeps no history
  };
  enum class Result { kText, kEnd, kInterrupted, kCancelled };

  explicit LineReader(Options options);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Reads the next input into text. kEnd: end of input (Ctrl-D); kInterrupted: Ctrl-C at an empty
  // prompt; kCancelled: Ctrl-C discarded a half-typed input. On a terminal Ctrl-C is a key while
  // editing; a SIGINT (the flag its handler sets) that interrupts the read counts the same; the
  // caller clears the flag.
  Result read(std::string& text, const std::atomic<bool>& interrupted);

 private:
  // One physical line without its newline; false at the end of input or on interruption.
  bool read_line(std::string& line, bool continuation);
  static const char* prompt(EditLine* el);
  static unsigned char on_ctrl_c(EditLine* el, int key);

  Options options_;
  EditLine* el_ = nullptr;
  History* history_ = nullptr;
  bool continuation_ = false;  // which prompt to show
  bool ctrl_c_ = false;        // the last el_gets ended with Ctrl-C ...
  bool ctrl_c_typed_ = false;  // ... over a non-empty line
};

}  // namespace latte
