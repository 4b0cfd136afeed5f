#include "src/server/stop_strings.h"

#include <algorithm>

namespace latte::server {
namespace {

// Length of the longest suffix of `text` that is a proper prefix of `stop`.
size_t stop_prefix_at_end(std::string_view text, std::string_view stop) {
  for (size_t n = std::min(text.size(), stop.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == stop.substr(0, n)) return n;
  return 0;
}

}  // namespace

std::string StopStrings::push(std::string_view text) {
  if (matched_) return {};
  held_ += text;
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    matched_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  size_t keep = 0;
  for (const std::string& s : stops_) keep = std::max(keep, stop_prefix_at_end(held_, s));
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopStrings::flush() {
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace latte::server
