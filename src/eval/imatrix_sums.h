// Squared activations summed per weight matrix, as llama.cpp's imatrix tool accumulates them, and
// its two file formats (the reader that quantization uses is convert/imatrix.h):
//  - GGUF (the default; llama.cpp's current format): general.type "imatrix", imatrix.datasets,
//    imatrix.chunk_count, imatrix.chunk_size, and per weight "<name>.in_sum2" f32 [n_cols,
//    n_matrix] (the raw sums) with "<name>.counts" f32 [1, n_matrix] (activations summed into
//    each matrix: tokens, or the tokens routed to each expert).
//  - legacy .dat (what the 2025-02 llama-imatrix writes): per entry the name, its call count and
//    (sum / count) * ncall per column; then the largest call count and the dataset's name.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace latte::eval {

struct ImatrixEntry {
  int64_t n_cols = 0;           // columns per matrix (the weight's input width)
  std::vector<float> sums;      // [n_matrix][n_cols]: sums of squared activations
  std::vector<int64_t> counts;  // per value: activations summed into it (equal within a matrix)
  int32_t ncall = 0;            // graph evaluations that added to it

  int64_t n_matrix() const { return n_cols > 0 ? static_cast<int64_t>(sums.size()) / n_cols : 1; }
  // Values whose count is 0 (experts no token was routed to).
  int64_t zero_counts() const;
};

struct ImatrixWriteReport {
  int64_t written = 0;
  std::vector<std::string> skipped;  // "name: why"
};

class ImatrixSums {
 public:
  std::map<std::string, ImatrixEntry> entries;
  int64_t chunks = 0;                 // chunks of text evaluated, in-files' included
  int64_t chunk_size = 0;             // tokens per chunk (n_ctx); 0 when unknown
  std::vector<std::string> datasets;  // the texts' file names

  // Reads either format for merging (llama-imatrix's --in-file): a legacy entry's values become
  // sums of weight ncall with count ncall, as llama-imatrix loads them. Throws ggl::Error naming
  // the path for a missing, truncated or inconsistent file.
  static ImatrixSums load(const std::string& path);
  // Adds another's sums, counts and calls entry by entry; throws ggl::Error when an entry's size
  // differs.
  void merge(const ImatrixSums& other);

  // Writes entries with any data (partial ones too: their unrouted experts have count 0).
  ImatrixWriteReport write_gguf(const std::string& path) const;
  // Writes complete entries only (the legacy format has no counts to say an expert is missing).
  ImatrixWriteReport write_legacy(const std::string& path) const;
};

}  // namespace latte::eval
