// One reply's text pipeline, token by token: the streaming detokenizer (only whole UTF-8
// characters), the stop strings (text that may start one is held back), and for chat the split of
// DeepSeek's <think>...</think> spans into reasoning_content, the tags themselves dropped, and the
// whitespace that opens the answer or the reasoning trimmed (as `latte chat` prints it).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/chat/thinking_filter.h"
#include "src/server/stop_strings.h"
#include "src/tokenizer/stream_decoder.h"

namespace latte::server {

struct ReplyDelta {
  std::string content, reasoning;
};

class ReplyText {
 public:
  struct Options {
    std::vector<std::string> stop{};
    bool split_thinking = false;   // chat: <think> spans go to `reasoning`
    bool starts_thinking = false;  // the generation prompt opened a <think> span
    bool trim_leading_space = false;
  };
  ReplyText(const Tokenizer& tokenizer, Options options);
  ReplyText(const ReplyText&) = delete;
  ReplyText& operator=(const ReplyText&) = delete;

  // The text a generated token completes (end-of-generation tokens are not pushed).
  ReplyDelta push(int32_t token);
  // The end of the reply: whatever is still held back (nothing after a stop string).
  ReplyDelta finish();
  bool stopped() const { return stops_.matched(); }

 private:
  void route(std::string_view text, ReplyDelta& out);

  StreamDecoder decoder_;
  StopStrings stops_;
  std::optional<ThinkingFilter> thinking_;
  bool trim_;
  bool content_started_ = false, reasoning_started_ = false;
  ReplyDelta* sink_ = nullptr;  // where the thinking filter's output goes during a call
};

}  // namespace latte::server
