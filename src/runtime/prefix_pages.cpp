#include "src/runtime/prefix_pages.h"

#include <algorithm>
#include <cstring>

#include "ggml-like/core/error.h"

namespace latte {

PrefixPages::PrefixPages(int64_t n_pages, int64_t page_tokens)
    : page_tokens_(page_tokens), pages_(static_cast<size_t>(n_pages)) {
  if (n_pages <= 0 || page_tokens <= 0) ggl::fail("{} pages of {} tokens: both must be positive", n_pages, page_tokens);
  for (int64_t p = n_pages - 1; p >= 0; --p) free_.push_back(p);
}

std::string PrefixPages::key_of(int64_t parent, std::span<const int32_t> tokens) {
  std::string key(sizeof parent + tokens.size_bytes(), '\0');
  std::memcpy(key.data(), &parent, sizeof parent);
  std::memcpy(key.data() + sizeof parent, tokens.data(), tokens.size_bytes());
  return key;
}

std::optional<int64_t> PrefixPages::allocate() {
  if (free_.empty() && !lru_.empty()) evict(lru_.front());
  if (free_.empty()) return std::nullopt;
  const int64_t page = free_.back();
  free_.pop_back();
  pages_[static_cast<size_t>(page)].refs = 1;
  return page;
}

void PrefixPages::retain(int64_t page) {
  Page& p = pages_[static_cast<size_t>(page)];
  if (p.refs == 0) {
    if (!p.published) ggl::fail("cache page {} is free: it cannot be shared", page);
    lru_.erase(p.in_line);
  }
  ++p.refs;
}

void PrefixPages::release(int64_t page) {
  Page& p = pages_[static_cast<size_t>(page)];
  if (p.refs <= 0) ggl::fail("cache page {} released more often than taken", page);
  if (--p.refs > 0) return;
  if (p.published) {
    p.in_line = lru_.insert(lru_.end(), page);
  } else {
    free_.push_back(page);
  }
}

int64_t PrefixPages::publish(int64_t page, int64_t parent, std::span<const int32_t> tokens) {
  if (static_cast<int64_t>(tokens.size()) != page_tokens_)
    ggl::fail("a published cache page holds {} tokens, not {}", page_tokens_, tokens.size());
  Page& p = pages_[static_cast<size_t>(page)];
  if (p.published) return page;
  std::string key = key_of(parent, tokens);
  if (const auto it = index_.find(key); it != index_.end()) return it->second;
  p.published = true;
  p.parent = parent;
  if (parent >= 0) pages_[static_cast<size_t>(parent)].children.push_back(page);
  index_.emplace(key, page);
  p.key = std::move(key);
  return page;
}

std::vector<int64_t> PrefixPages::lookup(std::span<const int32_t> tokens) const {
  std::vector<int64_t> found;
  int64_t parent = -1;
  for (size_t at = 0; at + static_cast<size_t>(page_tokens_) <= tokens.size();
       at += static_cast<size_t>(page_tokens_)) {
    const auto it = index_.find(key_of(parent, tokens.subspan(at, static_cast<size_t>(page_tokens_))));
    if (it == index_.end()) break;
    found.push_back(it->second);
    parent = it->second;
  }
  return found;
}

void PrefixPages::evict(int64_t page) {
  Page& p = pages_[static_cast<size_t>(page)];
  for (int64_t child : std::vector<int64_t>(p.children)) evict(child);
  if (p.refs != 0) ggl::fail("cache page {} is mapped by {} sequences: it cannot be evicted", page, p.refs);
  if (p.parent >= 0) std::erase(pages_[static_cast<size_t>(p.parent)].children, page);
  index_.erase(p.key);
  lru_.erase(p.in_line);
  p = Page{};
  free_.push_back(page);
}

}  // namespace latte
