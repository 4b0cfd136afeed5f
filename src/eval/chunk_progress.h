// A progress bar for chunked evaluations (perplexity, imatrix) on stderr: chunks done, the running
// perplexity, the time left. Drawn only when stderr is a terminal and stdout is not one (stdout
// carries the running estimates, "[1]12.3456,[2]...", which would share the bar's line).
#pragma once
#include <chrono>
#include <cstdint>

namespace latte::eval {

class ChunkProgress {
 public:
  ChunkProgress(int64_t n_chunk, bool enabled);
  ~ChunkProgress();
  ChunkProgress(const ChunkProgress&) = delete;
  ChunkProgress& operator=(const ChunkProgress&) = delete;

  // After chunk (1-based) with the running perplexity (0: none yet).
  void chunk_done(int64_t chunk, double ppl);
  // Clears the bar.
  void finish();
  double elapsed_seconds() const;

 private:
  int64_t n_chunk_;
  bool draw_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace latte::eval
