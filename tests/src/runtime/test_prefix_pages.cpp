// The page bookkeeping of the cache pool (src/runtime/prefix_pages.h): reference counts, the
// prefix tree of published pages and its lookup, the eviction line (least recently released
// first, a page with its subtree), and a duplicate publication answered with the page published
// first.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "ggml-like/core/error.h"
#include "src/runtime/prefix_pages.h"

namespace test_prefix_pages {

constexpr int64_t kPage = 4;

std::vector<int32_t> counting(int32_t first, size_t n) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Publishes tokens' whole pages as one sequence would, each in a fresh page; returns the pages.
std::vector<int64_t> publish_all(latte::PrefixPages& p, const std::vector<int32_t>& tokens) {
  std::vector<int64_t> pages;
  for (size_t at = 0; at + kPage <= tokens.size(); at += kPage) {
    const int64_t page = *p.allocate();
    EXPECT_EQ(p.publish(page, pages.empty() ? -1 : pages.back(), std::span(tokens).subspan(at, kPage)), page);
    pages.push_back(page);
  }
  return pages;
}

TEST(PrefixPages, LookupFollowsTheTreeOfWholePages) {
  latte::PrefixPages p(8, kPage);
  const std::vector<int32_t> a = counting(0, 12);  // three pages
  const std::vector<int64_t> pages = publish_all(p, a);
  EXPECT_EQ(p.lookup(a), pages);
  EXPECT_EQ(p.lookup(counting(0, 11)), std::vector<int64_t>(pages.begin(), pages.begin() + 2));  // whole pages only
  std::vector<int32_t> b = a;
  b[5] = 99;  // differs in the second page
  EXPECT_EQ(p.lookup(b), std::vector<int64_t>{pages[0]});
  EXPECT_TRUE(p.lookup(counting(1, 12)).empty());
  // The same tokens after another parent are another key.
  std::vector<int32_t> c = counting(50, 4);
  c.insert(c.end(), a.begin() + 4, a.begin() + 8);
  EXPECT_TRUE(p.lookup(c).empty());
  EXPECT_EQ(p.n_used(), 3);
  EXPECT_EQ(p.n_published(), 3);
}

TEST(PrefixPages, ReleasedPublishedPagesStayCachedUntilNeeded) {
  latte::PrefixPages p(4, kPage);
  const std::vector<int32_t> a = counting(0, 8), b = counting(100, 4);
  const std::vector<int64_t> pa = publish_all(p, a);
  const std::vector<int64_t> pb = publish_all(p, b);
  const int64_t unpublished = *p.allocate();
  EXPECT_EQ(p.n_free(), 0);
  EXPECT_FALSE(p.allocate().has_value());  // everything in use

  // Released: a's pages (leaf first, as a sequence gives them back), then b's; the unpublished
  // page is free at once.
  p.release(pa[1]);
  p.release(pa[0]);
  p.release(pb[0]);
  p.release(unpublished);
  EXPECT_EQ(p.n_cached(), 3);
  EXPECT_EQ(p.n_free(), 1);
  EXPECT_EQ(p.lookup(a), pa);

  // A cached page mapped again leaves the line; a second sequence shares it.
  p.retain(pb[0]);
  p.retain(pb[0]);
  EXPECT_EQ(p.refs(pb[0]), 2);
  EXPECT_EQ(p.n_cached(), 2);

  // The free page first, then the least recently released: a's leaf, then its root.
  EXPECT_EQ(p.allocate(), unpublished);
  EXPECT_EQ(p.allocate(), pa[1]);
  EXPECT_EQ(p.lookup(a), std::vector<int64_t>{pa[0]});
  EXPECT_EQ(p.allocate(), pa[0]);
  EXPECT_TRUE(p.lookup(a).empty());
  EXPECT_FALSE(p.allocate().has_value());  // b's page is mapped
  EXPECT_EQ(p.lookup(b), pb);
}

TEST(PrefixPages, EvictingAPageEvictsItsSubtree) {
  latte::PrefixPages p(3, kPage);
  const std::vector<int32_t> a = counting(0, 8);
  const std::vector<int64_t> pa = publish_all(p, a);
  // The root released last-but-first: it is first in line, and takes its child with it.
  p.release(pa[0]);
  p.release(pa[1]);
  const int64_t other = *p.allocate();
  EXPECT_NE(other, pa[0]);
  EXPECT_EQ(p.n_cached(), 2);
  EXPECT_TRUE(p.allocate().has_value());  // evicts pa[0] and pa[1]
  EXPECT_EQ(p.n_cached(), 0);
  EXPECT_EQ(p.n_free(), 1);
  EXPECT_EQ(p.n_published(), 0);
  EXPECT_TRUE(p.lookup(a).empty());
}

TEST(PrefixPages, ADuplicatePublicationGivesTheFirstPage) {
  latte::PrefixPages p(4, kPage);
  const std::vector<int32_t> a = counting(0, 4);
  const int64_t first = *p.allocate(), second = *p.allocate();
  EXPECT_EQ(p.publish(first, -1, a), first);
  EXPECT_EQ(p.publish(second, -1, a), first);
  EXPECT_FALSE(p.published(second));
  p.release(second);
  EXPECT_EQ(p.n_free(), 3);  // the duplicate was never published
  EXPECT_EQ(p.lookup(a), std::vector<int64_t>{first});
}

TEST(PrefixPages, MisuseThrows) {
  latte::PrefixPages p(2, kPage);
  const int64_t page = *p.allocate();
  EXPECT_THROW(p.publish(page, -1, counting(0, 3)), ggl::Error);  // not a whole page
  p.release(page);
  EXPECT_THROW(p.release(page), ggl::Error);
  EXPECT_THROW(p.retain(page), ggl::Error);  // free: nothing to share
  EXPECT_THROW(latte::PrefixPages(0, kPage), ggl::Error);
}

}  // namespace test_prefix_pages
