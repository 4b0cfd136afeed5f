// Stop strings over streamed text: a reply ends just before the first occurrence of any of them,
// and text that might be the start of one is held back until it is known not to be, so a client
// never sees part of a stop string (OpenAI's `stop`).
//
//   StopStrings stops({"\n\n", "User:"});
//   out += stops.push(piece);       // the text that is safe to send
//   if (stops.matched()) ...        // end the reply; nothing after the stop string comes out
//   out += stops.flush();           // at another end: what was held back
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace latte::server {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Adds generated text; returns what can be sent now. After a match, returns the text before the
  // stop string and then only empty strings.
  std::string push(std::string_view text);
  // The held-back text (a partial stop string when the reply ends otherwise); empty after a match.
  std::string flush();
  bool matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool matched_ = false;
};

}  // namespace latte::server
