#include "src/tokenizer/special_tokens.h"

#include <algorithm>
#include <map>

namespace latte {

SpecialTokenMatcher::SpecialTokenMatcher(const Vocab& vocab) {
  for (int32_t id = 0; id < vocab.size(); ++id) {
    TokenType t = vocab.type(id);
    bool special = t == TokenType::kControl || t == TokenType::kUnknown;
    if (!special && t != TokenType::kUserDefined) continue;
    const std::string& text = vocab.texts[id];
    if (text.empty()) continue;
    by_text_.try_emplace(text, Candidate{id, special});  // first id wins: ties go to the lower id
    lengths_.push_back(text.size());
    first_byte_[static_cast<uint8_t>(text[0])] = true;
  }
  std::sort(lengths_.begin(), lengths_.end(), std::greater<>());
  lengths_.erase(std::unique(lengths_.begin(), lengths_.end()), lengths_.end());
}

std::vector<TextFragment> SpecialTokenMatcher::partition(std::string_view text, bool parse_special) const {
  struct Occurrence {
    size_t pos, len;
    int32_t id;
  };
  std::vector<Occurrence> found;
  if (!by_text_.empty()) {
    for (size_t pos = 0; pos < text.size(); ++pos) {
      if (!first_byte_[static_cast<uint8_t>(text[pos])]) continue;
      for (size_t len : lengths_) {
        if (len > text.size() - pos) continue;
        auto it = by_text_.find(text.substr(pos, len));
        if (it == by_text_.end() || (it->second.needs_parse_special && !parse_special)) continue;
        found.push_back({pos, len, it->second.id});
      }
    }
  }
  std::vector<TextFragment> fragments;
  if (found.empty()) {
    if (!text.empty()) fragments.push_back({text, -1});
    return fragments;
  }

  // Longest texts claim their places first, then shorter ones where nothing is claimed yet;
  // among equals, lower ids first, then left to right.
  std::sort(found.begin(), found.end(), [](const Occurrence& a, const Occurrence& b) {
    if (a.len != b.len) return a.len > b.len;
    if (a.id != b.id) return a.id < b.id;
    return a.pos < b.pos;
  });
  std::map<size_t, Occurrence> claimed;  // by start position; intervals never overlap
  for (const Occurrence& o : found) {
    auto next = claimed.lower_bound(o.pos);
    if (next != claimed.end() && next->first < o.pos + o.len) continue;
    if (next != claimed.begin()) {
      auto prev = std::prev(next);
      if (prev->second.pos + prev->second.len > o.pos) continue;
    }
    claimed.emplace(o.pos, o);
  }

  size_t done = 0;
  for (const auto& [pos, o] : claimed) {
    if (pos > done) fragments.push_back({text.substr(done, pos - done), -1});
    fragments.push_back({text.substr(pos, o.len), o.id});
    done = pos + o.len;
  }
  if (done < text.size()) fragments.push_back({text.substr(done), -1});
  return fragments;
}

}  // namespace latte
