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
  el_source(el_, nullptr);  // the user's ~/.editrc, if any
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
      if (interrupted.load()) {
        bool typed = any;
        if (el_) {
          const LineInfo* li = el_line(el_);
          typed = typed || (li && li->lastchar > li->buffer);
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
