// Progress of a tensor-by-tensor write on stderr: a redrawn bar (tensor i/N, bytes, ETA) when
// stderr is a terminal, nothing otherwise; and the peak resident memory for the summary line.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace latte::convert {

class Progress {
 public:
  // enabled: draw at all (the bar is still only drawn when stderr is a terminal).
  Progress(size_t n_tensors, uint64_t total_bytes, bool enabled);
  ~Progress();

  void tensor_done(const std::string& name, uint64_t bytes);
  // Clears the bar so the summary line starts on a clean line.
  void finish();
  double elapsed_seconds() const;

 private:
  void draw(const std::string& name);

  size_t n_tensors_;
  uint64_t total_bytes_;
  bool tty_;
  size_t done_tensors_ = 0;
  uint64_t done_bytes_ = 0;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// Peak resident set size of this process so far, in bytes.
uint64_t peak_rss_bytes();

// Passes a notice to `sink`, or without one prints "<program>: notice: <message>" on stderr.
void report_notice(const std::function<void(std::string_view)>& sink, std::string_view program,
                   std::string_view message);

// "11.33 MiB"
std::string human_bytes(uint64_t bytes);

}  // namespace latte::convert
