// An importance matrix file as stored, in either of llama.cpp's formats (convert/imatrix.h says
// which): per entry the sums of squared activations and how many activations went into each
// matrix. `latte quantize --imatrix` turns them into weights (convert/imatrix.h); `latte imatrix
// --in-file` adds them to its own sums (src/eval/imatrix_sums.h).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace latte::convert {

struct ImatrixFileEntry {
  int64_t n_cols = 0;         // values per matrix (a legacy entry: all its values, as one matrix)
  std::vector<float> values;  // [n_matrix][n_cols]: GGUF: the sums; legacy: mean x ncall as stored
  std::vector<float> counts;  // per matrix: GGUF: the counts; legacy: ncall
  int32_t ncall = 0;          // legacy: the stored call count; GGUF: 0
};

struct ImatrixFile {
  bool legacy = false;
  std::map<std::string, ImatrixFileEntry> entries;
  std::vector<std::string> datasets;  // GGUF: imatrix.datasets; legacy: the one name, if stored
  int64_t chunks = 0;                 // 0 when the file does not say
  int64_t chunk_size = 0;             // GGUF: imatrix.chunk_size; 0 when the file does not say

  // Reads either format (GGUF by its magic). Throws ggl::Error("PATH: ...") for a missing,
  // truncated or corrupt file and one without entries.
  static ImatrixFile read(const std::string& path);
};

}  // namespace latte::convert
