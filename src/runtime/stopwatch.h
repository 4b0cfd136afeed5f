// Wall-clock seconds since a start, on the steady clock: the timings that run, chat and bench
// report.
#pragma once
#include <chrono>

namespace latte {

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace latte
