// A DRAM read-bandwidth probe: every thread sums its share of a buffer much larger than the
// last-level cache, several passes, best pass kept. What decode can at best stream weights at.
#pragma once
#include <cstddef>

namespace latte::bench {

struct Bandwidth {
  double gb_per_s = 0;  // 1e9 bytes per second
  int threads = 0;
  size_t buffer_bytes = 0;
  int passes = 0;
};

inline constexpr size_t kProbeBytes = size_t{1} << 30;  // 1 GiB: far beyond any LLC

// Throws ggl::Error when the buffer cannot be allocated or the arguments are not positive.
Bandwidth measure_read_bandwidth(int threads, size_t buffer_bytes = kProbeBytes, int passes = 5);

}  // namespace latte::bench
