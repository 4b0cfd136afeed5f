#include "convert/imatrix.h"

#include <algorithm>
#include <cmath>

#include "convert/imatrix_file.h"
#include "ggml-like/core/error.h"

namespace latte::convert {

// Weights from the stored sums: a legacy value divided by its call count (kept where the count is
// 0), a GGUF sum by its matrix's count (1 where no activation reached the matrix).
ImportanceMatrix ImportanceMatrix::load(const std::string& path) {
  const ImatrixFile file = ImatrixFile::read(path);
  ImportanceMatrix m;
  m.path_ = path;
  if (!file.datasets.empty()) m.dataset_ = file.datasets.front();
  m.chunks_ = file.chunks;
  for (const auto& [name, e] : file.entries) {
    std::vector<float> v(e.values.size());
    for (size_t i = 0; i < v.size(); ++i) {
      const float count = e.counts[i / static_cast<size_t>(e.n_cols)];
      v[i] = count > 0.0f ? e.values[i] / count : (file.legacy ? e.values[i] : 1.0f);
    }
    for (float x : v)
      if (!std::isfinite(x)) ggl::fail("{}: importance matrix entry '{}' holds a non-finite value", path, name);
    m.entries_.emplace(name, std::move(v));
  }
  return m;
}

const std::vector<float>* ImportanceMatrix::find(const std::string& tensor) const {
  const auto it = entries_.find(tensor);
  return it == entries_.end() ? nullptr : &it->second;
}

void ImportanceMatrix::select(const std::vector<std::string>& include, const std::vector<std::string>& exclude) {
  if (!include.empty() && !exclude.empty())
    ggl::fail("--include-weights and --exclude-weights cannot be used together");
  auto named = [](const std::string& tensor, const std::vector<std::string>& parts) {
    return std::any_of(parts.begin(), parts.end(),
                       [&tensor](const std::string& p) { return tensor.find(p) != std::string::npos; });
  };
  std::erase_if(entries_, [&](const auto& e) {
    return (!exclude.empty() && named(e.first, exclude)) || (!include.empty() && !named(e.first, include));
  });
}

void ImportanceMatrix::add_metadata(ggl::Metadata& md) const {
  md.set("quantize.imatrix.file", ggl::Value{path_});
  if (!dataset_.empty()) md.set("quantize.imatrix.dataset", ggl::Value{dataset_});
  md.set("quantize.imatrix.entries_count", ggl::Value{static_cast<uint32_t>(entries_.size())});
  if (chunks_ > 0) md.set("quantize.imatrix.chunks_count", ggl::Value{static_cast<uint32_t>(chunks_)});
}

}  // namespace latte::convert
