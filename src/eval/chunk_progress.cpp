#include "src/eval/chunk_progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace latte::eval {

ChunkProgress::ChunkProgress(int64_t n_chunk, bool enabled)
    : n_chunk_(n_chunk),
      draw_(enabled && ::isatty(STDERR_FILENO) == 1 && ::isatty(STDOUT_FILENO) == 0),
      start_(std::chrono::steady_clock::now()) {}

ChunkProgress::~ChunkProgress() { finish(); }

double ChunkProgress::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ChunkProgress::chunk_done(int64_t chunk, double ppl) {
  if (!draw_) return;
  const double t = elapsed_seconds();
  const int left =
      static_cast<int>(std::lround(t / static_cast<double>(chunk) * static_cast<double>(n_chunk_ - chunk)));
  constexpr int64_t kWidth = 24;
  std::string bar(static_cast<size_t>(chunk * kWidth / n_chunk_), '#');
  bar.resize(kWidth, '.');
  const std::string line = fmt::format("\r\033[K[{}] chunk {}/{}  PPL {:.4f}  ETA {}:{:02d}", bar, chunk, n_chunk_, ppl,
                                       left / 60, left % 60);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  drawn_ = true;
}

void ChunkProgress::finish() {
  if (!drawn_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace latte::eval
