// Seeded random weights for synthetic models. Counter-based: element j of row r of a tensor is
// a pure function of (seed, tensor name, r, j), so rows can be drawn in parallel, in any order and
// on any thread count with the same result, and a file is reproducible from its seed.
//
// Values are uniform (cheaper to draw than normal, and the scale is what matters here):
//   kMatrix  mean 0, standard deviation 1/sqrt(fan_in), so a unit-scale input gives a unit-scale
//            output and activations stay finite through any number of layers
//   kNorm    1 +- a few percent
//   kBias    mean 0, standard deviation 0.02
#pragma once
#include <cstdint>

#include "src/synth/synth_plan.h"

namespace latte::synth {

class RandomWeights {
 public:
  RandomWeights(uint64_t seed, const SynthTensor& tensor);

  // Rows [first, first + count) of the tensor, ne[0] floats each, into dst (rows drawn in
  // parallel with OpenMP when there are many).
  void fill(int64_t first, int64_t count, float* dst) const;

  float offset() const { return offset_; }
  float half_width() const { return half_width_; }  // values lie in offset +- half_width

 private:
  void fill_row(int64_t row, float* dst) const;

  uint64_t key_;
  int64_t row_length_;
  float offset_;
  float half_width_;
};

}  // namespace latte::synth
