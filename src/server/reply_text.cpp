#include "src/server/reply_text.h"

namespace latte::server {
namespace {

// `text` without the whitespace it opens with when `started` is still false; sets it once text is left.
std::string_view trim_reply_start(std::string_view text, bool& started) {
  if (!started) {
    text.remove_prefix(std::min(text.size(), text.find_first_not_of(" \t\r\n")));
    started = !text.empty();
  }
  return text;
}

}  // namespace

ReplyText::ReplyText(const Tokenizer& tokenizer, Options options)
    : decoder_(tokenizer, {.render_special = false, .strip_leading_space = false}),
      stops_(std::move(options.stop)),
      trim_(options.trim_leading_space) {
  if (options.split_thinking) {
    thinking_.emplace(
        [this](std::string_view text, bool thinking) {
          if (text == "<think>" || text == "</think>") return;  // the tags delimit; they are not text
          if (thinking) {
            sink_->reasoning += trim_ ? trim_reply_start(text, reasoning_started_) : text;
          } else {
            sink_->content += trim_ ? trim_reply_start(text, content_started_) : text;
          }
        },
        options.starts_thinking);
  }
}

void ReplyText::route(std::string_view text, ReplyDelta& out) {
  if (text.empty()) return;
  if (!thinking_) {
    out.content += trim_ ? trim_reply_start(text, content_started_) : text;
    return;
  }
  sink_ = &out;
  thinking_->push(text);
  sink_ = nullptr;
}

ReplyDelta ReplyText::push(int32_t token) {
  ReplyDelta out;
  if (stops_.matched()) return out;
  route(stops_.push(decoder_.push(token)), out);
  if (stops_.matched() && thinking_) {
    sink_ = &out;
    thinking_->flush();
    sink_ = nullptr;
  }
  return out;
}

ReplyDelta ReplyText::finish() {
  ReplyDelta out;
  if (!stops_.matched()) {
    route(stops_.push(decoder_.flush()), out);
    route(stops_.flush(), out);
  }
  if (thinking_) {
    sink_ = &out;
    thinking_->flush();
    sink_ = nullptr;
  }
  return out;
}

}  // namespace latte::server
