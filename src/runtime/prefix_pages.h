// Which pages of a cache pool (src/model/page_pool.h) are free, which are in use and by how many
// sequences, and which hold a known token prefix: the bookkeeping of prefix reuse at page
// granularity (SGLang's radix tree and vLLM's hash chain of full blocks, in one).
//
// A full page whose rows a sequence computed is published under its tokens and its parent, the
// page before it in that sequence (none for the first): the published pages form a tree, each path
// from the root spelling a token prefix whose rows are cached. A later sequence whose tokens start
// the same way maps those pages instead of computing them (lookup). A page is reference-counted by
// the sequences mapping it; a published page no sequence maps stays cached, least recently
// released first in line for eviction, until a page is needed and none is free. Evicting a page
// evicts the subtree below it (its descendants are unreachable without it, and no sequence maps
// them: a sequence mapping a page maps its parent in the slot before).
#pragma once
#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace latte {

class PrefixPages {
 public:
  PrefixPages(int64_t n_pages, int64_t page_tokens);

  int64_t page_tokens() const { return page_tokens_; }
  int64_t n_pages() const { return static_cast<int64_t>(pages_.size()); }
  int64_t n_free() const { return static_cast<int64_t>(free_.size()); }
  int64_t n_cached() const { return static_cast<int64_t>(lru_.size()); }  // published, mapped by none
  int64_t n_used() const { return n_pages() - n_free() - n_cached(); }    // mapped by a sequence
  int64_t n_published() const { return static_cast<int64_t>(index_.size()); }

  // A page for one sequence (reference count 1): a free one, else the least recently released
  // cached page (and its subtree) evicted; nullopt when every page is in use.
  std::optional<int64_t> allocate();
  // One more sequence maps the page (a cached page leaves the eviction line).
  void retain(int64_t page);
  // One sequence less maps the page; at none it is cached when published, else free.
  void release(int64_t page);
  int refs(int64_t page) const { return pages_[static_cast<size_t>(page)].refs; }
  bool published(int64_t page) const { return pages_[static_cast<size_t>(page)].published; }

  // Publishes a full page holding the rows of `tokens` (page_tokens() of them) after `parent`'s
  // prefix (-1: the first page). Returns the page now published under that key: `page`, or one
  // published earlier with the same tokens (which `page` then does not replace).
  int64_t publish(int64_t page, int64_t parent, std::span<const int32_t> tokens);
  // The published pages holding the longest run of whole pages that starts `tokens`, in order.
  std::vector<int64_t> lookup(std::span<const int32_t> tokens) const;

 private:
  struct Page {
    int refs = 0;
    bool published = false;
    std::string key;                       // published: the parent and tokens, as bytes
    int64_t parent = -1;                   // published: the page before it
    std::vector<int64_t> children;         // published pages whose parent this is
    std::list<int64_t>::iterator in_line;  // cached: its place in lru_
  };

  static std::string key_of(int64_t parent, std::span<const int32_t> tokens);
  // Unpublishes a cached page and its subtree; all of them become free.
  void evict(int64_t page);

  int64_t page_tokens_;
  std::vector<Page> pages_;
  std::vector<int64_t> free_;  // lowest last, so that a sequence's pages tend to be neighbours in the pool
  std::list<int64_t> lru_;     // cached pages, least recently released first
  std::unordered_map<std::string, int64_t> index_;
};

}  // namespace latte
