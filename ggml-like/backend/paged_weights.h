// Stacked expert weights whose slices are not all in memory. A mul_mat_id's weights [K, N, E]
// hold one [K, N] slice per expert along ne[2]; where they live in a file larger than the RAM a
// run may use, whoever holds them (a model's expert cache) makes the slices a node's ids name
// readable before the node runs and says where each one is, so the backend reads them there
// instead of at data + e * nb[2]. The tensor library knows nothing of files or caches: only this.
//
// A paged leaf keeps its data pointer (a file's mapping): a backend that does not ask the pager
// reads the same bytes from there, only not within the budget.
#pragma once
#include <cstdint>
#include <span>

#include "ggml-like/core/tensor.h"

namespace ggl {

class PagedWeights {
 public:
  virtual ~PagedWeights() = default;
  // Whether leaf (a graph's external weight) has its slices paged.
  virtual bool pages(const Tensor& leaf) const = 0;
  // Makes slices used[0..n) of leaf readable until the next call, and writes where slice used[i]
  // starts to at[used[i]] (at has leaf.ne[2] entries; the others are left alone). A backend calls
  // it from one thread, after every earlier node of the graph has finished and before the node
  // that reads the slices starts. Throws ggl::Error where a slice cannot be read (naming what
  // failed); the graph's computation then stops with that error.
  virtual void acquire(const Tensor& leaf, std::span<const int32_t> used, std::span<const uint8_t*> at) = 0;
  // A graph's prefetch node: slices likely[0..n) of leaf will probably be acquired soon. The pager
  // may start reading them and return at once; a pager that cannot read ahead ignores it. Called
  // like acquire (one thread, the ids computed). Never throws for a read: a read that fails shows
  // when the slice is acquired.
  virtual void prefetch(const Tensor& leaf, std::span<const int32_t> likely) {
    (void)leaf;
    (void)likely;
  }
};

}  // namespace ggl
