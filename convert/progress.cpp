#include "convert/progress.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace latte::convert {

Progress::Progress(size_t n_tensors, uint64_t total_bytes, bool enabled)
    : n_tensors_(n_tensors),
      total_bytes_(total_bytes),
      tty_(enabled && ::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() { finish(); }

double Progress::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::tensor_done(const std::string& name, uint64_t bytes) {
  ++done_tensors_;
  done_bytes_ += bytes;
  if (!tty_) return;
  auto now = std::chrono::steady_clock::now();
  // Redraw at most ten times a second, and always for the last tensor.
  if (done_tensors_ < n_tensors_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw(name);
}

void Progress::draw(const std::string& name) {
  const double t = elapsed_seconds();
  const double frac = total_bytes_ ? static_cast<double>(done_bytes_) / static_cast<double>(total_bytes_) : 1.0;
  std::string eta = "--:--";
  if (frac > 0.0 && frac < 1.0) {
    const int left = static_cast<int>(std::lround(t / frac - t));
    eta = fmt::format("{}:{:02d}", left / 60, left % 60);
  } else if (frac >= 1.0) {
    eta = "0:00";
  }
  constexpr int kBarWidth = 24;
  const int filled = static_cast<int>(frac * kBarWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kBarWidth, '.');
  std::string shown = name.size() > 36 ? "..." + name.substr(name.size() - 33) : name;
  std::fprintf(stderr, "\r\033[K[%s] %zu/%zu tensors  %s / %s  ETA %s  %s", bar.c_str(), done_tensors_, n_tensors_,
               human_bytes(done_bytes_).c_str(), human_bytes(total_bytes_).c_str(), eta.c_str(), shown.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }
}

uint64_t peak_rss_bytes() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", v, units[u]);
}

void report_notice(const std::function<void(std::string_view)>& sink, std::string_view program,
                   std::string_view message) {
  if (sink)
    sink(message);
  else
    std::fprintf(stderr, "%.*s: notice: %.*s\n", static_cast<int>(program.size()), program.data(),
                 static_cast<int>(message.size()), message.data());
}

}  // namespace latte::convert
