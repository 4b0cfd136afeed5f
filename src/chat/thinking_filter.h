// Separates a reasoning model's <think>…</think> spans from the answer while the reply streams, so
// the REPL can show them dimmed or hide them. A tag split across streamed pieces is held back
// until it is complete (or turns out not to be a tag).
#pragma once
#include <functional>
#include <string>
#include <string_view>

namespace latte {

class ThinkingFilter {
 public:
  // Receives text and whether it belongs to a reasoning span (the tags themselves included).
  using Sink = std::function<void(std::string_view text, bool thinking)>;

  // starts_inside: the generation prompt already opened the span (DeepSeek-R1's "<think>\n").
  ThinkingFilter(Sink sink, bool starts_inside = false) : sink_(std::move(sink)), thinking_(starts_inside) {}

  void push(std::string_view text);
  // Ends the reply: passes on whatever is still held back.
  void flush();
  bool thinking() const { return thinking_; }

 private:
  Sink sink_;
  bool thinking_;
  std::string held_;  // a possible start of the next tag
};

}  // namespace latte
