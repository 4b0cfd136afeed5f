// What the IQ2 and IQ1 quantizers search (ggml's iq2xs_init_impl): each grid's points with the
// odd coordinates 2l + 1 of their level indices l, which point (if any) every one of the 3^8
// combinations of level indices is, and for those that are no point, the grid points nearest to it.
#pragma once
#include <cstdint>
#include <vector>

#include "ggml-like/core/types.h"

namespace ggl::quant {

class IqLattice {
 public:
  // The lattice of IQ2_XXS, IQ2_XS, IQ2_S, or IQ1_S / IQ1_M (one shared grid); built once, on
  // first use (thread-safe).
  static const IqLattice& of(Type t);

  // The 8 level indices l (0..2) packed as the points are: bits 2i..2i+1 hold l of coordinate i.
  static uint16_t key(const int8_t* l) {
    uint16_t u = 0;
    for (int i = 0; i < 8; ++i) u = static_cast<uint16_t>(u | (l[i] << (2 * i)));
    return u;
  }
  // The grid index of the point with these level indices, or -1 where they are no grid point.
  int index(uint16_t key) const { return map_[key] >= 0 ? map_[key] : -1; }
  // The grid points nearest to a key that is no point (nearest in squared distance over the
  // nearest `rings` distinct distances: 2 for IQ2_XXS/XS, 1 for IQ2_S, 3 for IQ1), by increasing
  // distance then index. Empty for keys that are points.
  const uint16_t* neighbours(uint16_t key, int* count) const;
  // Coordinate i of point k: 2l + 1 for its level index l.
  int coordinate(int k, int i) const { return static_cast<int8_t>(points_[k] >> (8 * i)); }
  int size() const { return static_cast<int>(points_.size()); }

 private:
  IqLattice(const uint16_t* points, int n, int rings);

  std::vector<uint64_t> points_;      // coordinates 2l + 1 as bytes
  std::vector<int> map_;              // key -> index >= 0, or -(offset into neighbours_ + 1)
  std::vector<uint16_t> neighbours_;  // per non-point key: count, then the indices
};

}  // namespace ggl::quant
