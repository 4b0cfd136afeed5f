// The quantizers' view of the IQ2 / IQ1 grids, built as ggml's iq2xs_init_impl builds it (the
// neighbour lists in the same order, which decides ties in the searches and so the bytes).
#include "ggml-like/quant/iq_lattice.h"

#include <algorithm>

#include "ggml-like/core/error.h"
#include "ggml-like/quant/iq_grids.h"

namespace ggl::quant {
namespace {

constexpr int kKeys = 1 << 16;  // every 16-bit key (those with a level index 3 are never asked)

bool is_ternary(uint32_t key) {
  for (int i = 0; i < 8; ++i)
    if (((key >> (2 * i)) & 3) == 3) return false;
  return true;
}

}  // namespace

IqLattice::IqLattice(const uint16_t* points, int n, int rings) : points_(n), map_(kKeys, -1) {
  for (int k = 0; k < n; ++k) {
    for (int i = 0; i < 8; ++i) points_[k] |= static_cast<uint64_t>(2 * ((points[k] >> (2 * i)) & 3) + 1) << (8 * i);
    map_[points[k]] = k;
  }
  // Squared distances between coordinates 1, 3, 5 are at most 8 * 4^2: the points are bucketed
  // by distance, in index order within a bucket (the order of ggml's sort by distance, then index).
  constexpr int kMaxD2 = 8 * 16;
  std::vector<int> d2(n);
  for (uint32_t key = 0; key < kKeys; ++key) {
    if (map_[key] >= 0 || !is_ternary(key)) continue;
    int count_at[kMaxD2 + 1] = {};
    for (int k = 0; k < n; ++k) {
      int sum = 0;
      for (int i = 0; i < 8; ++i) {
        const int d = coordinate(k, i) - static_cast<int>(2 * ((key >> (2 * i)) & 3) + 1);
        sum += d * d;
      }
      d2[k] = sum;
      ++count_at[sum];
    }
    // The points at the `rings` smallest distances that occur.
    map_[key] = -(static_cast<int>(neighbours_.size()) + 1);
    const size_t count_slot = neighbours_.size();
    neighbours_.push_back(0);
    int have = 0;
    for (int ring = 0; ring <= kMaxD2 && have < rings; ++ring) {
      if (count_at[ring] == 0) continue;
      ++have;
      for (int k = 0; k < n; ++k)
        if (d2[k] == ring) neighbours_.push_back(static_cast<uint16_t>(k));
    }
    neighbours_[count_slot] = static_cast<uint16_t>(neighbours_.size() - count_slot - 1);
  }
}

const uint16_t* IqLattice::neighbours(uint16_t key, int* count) const {
  if (map_[key] >= 0) {
    *count = 0;
    return nullptr;
  }
  const uint16_t* list = neighbours_.data() + (-map_[key] - 1);
  *count = list[0];
  return list + 1;
}

const IqLattice& IqLattice::of(Type t) {
  switch (t) {
    case Type::IQ2_XXS: {
      static const IqLattice lattice(kIq2xxsPoints, 256, 2);
      return lattice;
    }
    case Type::IQ2_XS: {
      static const IqLattice lattice(kIq2xsPoints, 512, 2);
      return lattice;
    }
    case Type::IQ2_S: {
      static const IqLattice lattice(kIq2sPoints, 1024, 1);
      return lattice;
    }
    case Type::IQ1_S:
    case Type::IQ1_M: {
      static const IqLattice lattice(kIq1sPoints, 2048, 3);
      return lattice;
    }
    default: fail("IqLattice: {} has no grid", type_name(t));
  }
}

}  // namespace ggl::quant
