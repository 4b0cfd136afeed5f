#include "src/chat/thinking_filter.h"

#include <algorithm>

namespace latte {
namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";

// Length of the longest suffix of s that is a proper prefix of tag.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

void ThinkingFilter::push(std::string_view text) {
  std::string s = std::move(held_);
  held_.clear();
  s += text;
  std::string_view rest = s;
  while (!rest.empty()) {
    const std::string_view tag = thinking_ ? kClose : kOpen;
    const size_t at = rest.find(tag);
    if (at == std::string_view::npos) {
      const size_t keep = partial_tag(rest, tag);
      if (rest.size() > keep) sink_(rest.substr(0, rest.size() - keep), thinking_);
      held_ = rest.substr(rest.size() - keep);
      return;
    }
    if (at > 0) sink_(rest.substr(0, at), thinking_);
    sink_(tag, true);
    thinking_ = !thinking_;
    rest.remove_prefix(at + tag.size());
  }
}

void ThinkingFilter::flush() {
  if (!held_.empty()) sink_(held_, thinking_);
  held_.clear();
}

}  // namespace latte
