#include "src/bench/bandwidth_probe.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "ggml-like/core/error.h"
#include "src/runtime/stopwatch.h"

namespace latte::bench {
namespace {

struct FreeDeleter {
  void operator()(uint64_t* p) const { std::free(p); }
};

}  // namespace

Bandwidth measure_read_bandwidth(int threads, size_t buffer_bytes, int passes) {
  if (threads < 1 || passes < 1 || buffer_bytes < 4096)
    ggl::fail("bandwidth probe: threads {}, passes {}, buffer {} bytes must be positive", threads, passes,
              buffer_bytes);
  const size_t n = buffer_bytes / sizeof(uint64_t) / 64 * 64;  // whole cache lines
  std::unique_ptr<uint64_t, FreeDeleter> buf(static_cast<uint64_t*>(std::aligned_alloc(64, n * sizeof(uint64_t))));
  if (!buf) ggl::fail("bandwidth probe: cannot allocate {} bytes", n * sizeof(uint64_t));
  uint64_t* data = buf.get();

  // Touch every page with the same static split the passes use.
#pragma omp parallel for schedule(static) num_threads(threads)
  for (size_t i = 0; i < n; ++i) data[i] = i;

  double best = 1e30;
  uint64_t sink = 0;
  for (int p = 0; p < passes; ++p) {
    const Stopwatch pass_time;
    uint64_t total = 0;
    // An integer sum: associative, so the compiler vectorises it and each core streams at the
    // rate its loads allow; the result is used so the reads cannot be dropped. Every line is
    // prefetched a page ahead, as the decode kernels' walks do (row_walk.h): with the hardware
    // prefetcher alone one core read 14.5 GB/s where the kernels streamed more (2-core Xeon VM,
    // docs/cpu-speed.md, "Decode rows"), and a bound below what the kernels reach bounds nothing.
    constexpr size_t kLine = 64 / sizeof(uint64_t), kAhead = 4096 / sizeof(uint64_t);
#pragma omp parallel for schedule(static) num_threads(threads) reduction(+ : total)
    for (size_t line = 0; line < n / kLine; ++line) {
      const uint64_t* l = data + line * kLine;
      __builtin_prefetch(l + kAhead);
      for (size_t i = 0; i < kLine; ++i) total += l[i];
    }
    const double s = pass_time.seconds();
    best = std::min(best, s);
    sink += total;
  }
  // n * (n - 1) / 2 per pass: a check that every element was read.
  const uint64_t expected = static_cast<uint64_t>(passes) * (static_cast<uint64_t>(n) * (n - 1) / 2);
  if (sink != expected) ggl::fail("bandwidth probe: wrong checksum (memory error?)");
  return {static_cast<double>(n * sizeof(uint64_t)) / best / 1e9, threads, n * sizeof(uint64_t), passes};
}

}  // namespace latte::bench
