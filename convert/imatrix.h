// Importance matrices (llama.cpp's imatrix tool output), read for `latte quantize --imatrix`: for
// each weight tensor, the mean squared activation of each input column (per expert for 3-D expert
// tensors), which the quantizers use to weight their error search.
//
// Both formats users have:
//  - GGUF (general.type "imatrix"): tensors "<tensor>.in_sum2" [ne0, n_matrix] (sums of squared
//    activations) and "<tensor>.counts" [1, n_matrix] (how many were summed), keys
//    imatrix.datasets and imatrix.chunk_count. Weight = in_sum2 / counts (1 where a count is 0).
//  - legacy .dat: int32 entry count; per entry int32 name length, name, int32 ncall, int32 nval,
//    nval floats (sums, divided by ncall when ncall > 0); then optionally int32 chunk count,
//    int32 length and the dataset's name.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ggml-like/gguf/gguf.h"

namespace latte::convert {

class ImportanceMatrix {
 public:
  // Reads either format; throws ggl::Error("PATH: ...") for a missing, truncated or corrupt file,
  // an empty one, and non-finite weights.
  static ImportanceMatrix load(const std::string& path);

  const std::string& path() const { return path_; }
  const std::string& dataset() const { return dataset_; }  // "" when the file does not say
  int64_t chunks() const { return chunks_; }               // 0 when the file does not say
  // Tensor name -> per-column weights, matrix after matrix.
  const std::map<std::string, std::vector<float>>& entries() const { return entries_; }
  const std::vector<float>* find(const std::string& tensor) const;

  // llama-quantize's --include-weights / --exclude-weights (at most one of the two non-empty):
  // keeps only the entries whose tensor name contains one of `include`, or drops those whose name
  // contains one of `exclude`. An importance matrix left with no entries counts as none.
  void select(const std::vector<std::string>& include, const std::vector<std::string>& exclude);

  // The quantize.imatrix.* keys llama.cpp's quantizer records (file, dataset, entries_count,
  // chunks_count; dataset and chunks only when known).
  void add_metadata(ggl::Metadata& md) const;

 private:
  std::string path_, dataset_;
  int64_t chunks_ = 0;
  std::map<std::string, std::vector<float>> entries_;
};

}  // namespace latte::convert
