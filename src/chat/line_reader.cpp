#include "src/chat/line_reader.h"

#include <histedit.h>

#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace latte {
namespace {

constexpr const char* kPrompt = "> ";
constexpr const char* kContinuationPrompt = ". ";

}  // namespace

LineReader::LineReader(Options options) : options_(std::move(options)) {
  if (!options_.terminal) return;
  // libedit edits characters of the locale's encoding: without a UTF-8 locale it drops non-ASCII
  // input, and models take UTF-8.
  if (!std::setlocale(LC_CTYPE, "") || MB_CUR_MAX == 1) std::setlocale(LC_CTYPE, "C.UTF-8");
  el_ = el_init("latte", stdin, stdout, stderr);
  history_ = history_init();
  HistEvent ev;
  history(history_, &ev, H_SETSIZE, 1000);
  history(history_, &ev, H_SETUNIQUE, 1);
  if (!options_.history_path.empty()) history(history_, &ev, H_LOAD, options_.history_path.c_str());
  el_set(el_, EL_EDITOR, "emacs");
  el_set(el_, EL_HIST, history, history_);
  el_set(el_, EL_CLIENTDATA, this);
  el_set(el_, EL_PROMPT, &LineReader::prompt);
  // While editing, Ctrl-C is a key (no SIGINT) bound to end the input: a signal could arrive just
  // before libedit starts reading and be missed. While a reply is generated the terminal is back
  // in its normal mode, where Ctrl-C raises SIGINT for the generation loop.
  el_set(el_, EL_SETTY, "-d", "-isig", nullptr);
  el_set(el_, EL_ADDFN, "latte-interrupt", "end the input as interrupted", &LineReader::on_ctrl_c);
  el_set(el_, EL_BIND, "^C", "latte-interrupt", nullptr);
  el_source(el_, nullptr);  // the user's ~/.editrc, if any
}

unsigned char LineReader::on_ctrl_c(EditLine* el, int) {
  void* self = nullptr;
  el_get(el, EL_CLIENTDATA, &self);
  const LineInfo* li = el_line(el);
  auto* reader = static_cast<LineReader*>(self);
  reader->ctrl_c_ = true;
  reader->ctrl_c_typed_ = li && li->lastchar > li->buffer;
  return CC_EOF;
}

LineReader::~LineReader() {
  if (history_) history_end(history_);
  if (el_) el_end(el_);
}

const char* LineReader::prompt(EditLine* el) {
  void* self = nullptr;
  el_get(el, EL_CLIENTDATA, &self);
  return static_cast<LineReader*>(self)->continuation_ ? kContinuationPrompt : kPrompt;
}

bool LineReader::read_line(std::string& line, bool continuation) {
  line.clear();
  if (!el_) {
    if (!std::getline(std::cin, line)) return false;
  } else {
    continuation_ = continuation;
    // Into editing mode before the prompt shows: libedit would switch only when it reads the first
    // key, and keys sent in between (pasted, or typed by a script that waits for the prompt) would
    // meet the line discipline's cooked mode, which turns Ctrl-D into a NUL byte.
    el_set(el_, EL_PREP_TERM, 1);
    ctrl_c_ = ctrl_c_typed_ = false;
    int count = 0;
    const char* s = el_gets(el_, &count);
    if (!s || count <= 0) return false;
    line.assign(s, static_cast<size_t>(count));
    if (!line.empty() && line.back() == '\n') line.pop_back();
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

LineReader::Result LineReader::read(std::string& text, const std::atomic<bool>& interrupted) {
  text.clear();
  std::string line;
  bool any = false;
  while (true) {
    if (!read_line(line, any)) {
      if (ctrl_c_ || interrupted.load()) {  // the key, or a SIGINT that interrupted the read
        const bool typed = any || ctrl_c_typed_;
        if (el_) {
          el_reset(el_);  // forget the half-typed line
          std::fputs("\n", stdout);
        }
        return typed ? Result::kCancelled : Result::kInterrupted;
      }
      if (el_ && any == false) std::fputs("\n", stdout);  // Ctrl-D: end the prompt's line
      return any ? Result::kText : Result::kEnd;
    }
    if (options_.blocks) {
      if (line.empty()) {
        if (any) break;
        continue;  // blank lines before a block
      }
      text += any ? "\n" + line : line;
      any = true;
      continue;
    }
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      text += line + "\n";
      any = true;
      continue;
    }
    text += line;
    any = true;
    break;
  }
  if (el_ && !text.empty()) {
    HistEvent ev;
    history(history_, &ev, H_ENTER, text.c_str());
    if (!options_.history_path.empty()) history(history_, &ev, H_SAVE, options_.history_path.c_str());
  }
  return Result::kText;
}

}  // namespace latte
