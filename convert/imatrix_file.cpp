#include "convert/imatrix_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "ggml-like/core/error.h"
#include "ggml-like/gguf/gguf.h"

namespace latte::convert {
namespace {

// Sequential little-endian reads of the legacy format; running past the end is an error.
class Cursor {
 public:
  Cursor(const std::string& path, const std::vector<char>& bytes) : path_(path), bytes_(bytes) {}
  bool at_end() const { return pos_ == bytes_.size(); }
  int32_t i32(std::string_view what) {
    int32_t v;
    take(&v, sizeof v, what);
    return v;
  }
  void take(void* dst, size_t n, std::string_view what) {
    if (n > bytes_.size() - pos_) ggl::fail("{}: truncated importance matrix (reading {})", path_, what);
    std::memcpy(dst, bytes_.data() + pos_, n);
    pos_ += n;
  }

 private:
  const std::string& path_;
  const std::vector<char>& bytes_;
  size_t pos_ = 0;
};

ImatrixFile read_legacy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ggl::fail("{}: cannot open the importance matrix ({})", path, std::strerror(errno));
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  Cursor c(path, bytes);
  ImatrixFile file;
  file.legacy = true;
  const int32_t n_entries = c.i32("the entry count");
  if (n_entries < 1) ggl::fail("{}: not an importance matrix (entry count {})", path, n_entries);
  for (int32_t i = 0; i < n_entries; ++i) {
    const int32_t len = c.i32("a name length");
    if (len < 1 || len > 4096)
      ggl::fail("{}: corrupt importance matrix (entry {} has a name of {} bytes)", path, i, len);
    std::string name(static_cast<size_t>(len), '\0');
    c.take(name.data(), name.size(), "a name");
    const int32_t ncall = c.i32("a call count");
    const int32_t nval = c.i32("a value count");
    if (nval < 1 || ncall < 0)
      ggl::fail("{}: corrupt importance matrix (entry '{}': {} values, {} calls)", path, name, nval, ncall);
    ImatrixFileEntry e;
    e.n_cols = nval;  // the format does not say how the values split into matrices
    e.values.resize(static_cast<size_t>(nval));
    c.take(e.values.data(), e.values.size() * sizeof(float), "the values of '" + name + "'");
    e.counts = {static_cast<float>(ncall)};
    e.ncall = ncall;
    if (!file.entries.emplace(std::move(name), std::move(e)).second)
      ggl::fail("{}: corrupt importance matrix (entry {} repeats a name)", path, i);
  }
  if (!c.at_end()) {  // newer files end with the chunk count and the dataset's name
    file.chunks = c.i32("the chunk count");
    const int32_t len = c.i32("the dataset name length");
    if (len < 0 || len > (1 << 20)) ggl::fail("{}: corrupt importance matrix (dataset name of {} bytes)", path, len);
    std::string dataset(static_cast<size_t>(len), '\0');
    c.take(dataset.data(), dataset.size(), "the dataset name");
    if (!c.at_end()) ggl::fail("{}: corrupt importance matrix (bytes after the dataset name)", path);
    if (!dataset.empty()) file.datasets.push_back(std::move(dataset));
  }
  return file;
}

ImatrixFile read_gguf(const std::string& path) {
  constexpr std::string_view kSums = ".in_sum2", kCounts = ".counts";
  const ggl::GgufFile f(path);
  const ggl::Metadata& md = f.metadata();
  ImatrixFile file;
  if (md.has("imatrix.datasets")) file.datasets = md.get<std::vector<std::string>>("imatrix.datasets");
  file.chunks = md.get_or<int64_t>("imatrix.chunk_count", 0);
  file.chunk_size = md.get_or<int64_t>("imatrix.chunk_size", 0);
  for (const ggl::TensorInfo& sums : f.tensors()) {
    if (!sums.name.ends_with(kSums)) continue;
    const std::string name = sums.name.substr(0, sums.name.size() - kSums.size());
    const ggl::TensorInfo* counts = f.find_tensor(name + std::string(kCounts));
    if (!counts) ggl::fail("{}: importance matrix has {}.in_sum2 but no {}.counts", path, name, name);
    if (sums.type != ggl::Type::F32 || counts->type != ggl::Type::F32)
      ggl::fail("{}: importance matrix tensors of '{}' are not f32", path, name);
    const int64_t n_matrix = counts->n_elements();
    if (sums.ne[1] * sums.ne[2] * sums.ne[3] != n_matrix)
      ggl::fail("{}: importance matrix entry '{}': {} sums do not match {} counts", path, name, sums.n_elements(),
                n_matrix);
    ImatrixFileEntry e;
    e.n_cols = sums.ne[0];
    const auto* s = reinterpret_cast<const float*>(sums.data);
    const auto* k = reinterpret_cast<const float*>(counts->data);
    e.values.assign(s, s + sums.n_elements());
    e.counts.assign(k, k + n_matrix);
    file.entries.emplace(name, std::move(e));
  }
  for (const ggl::TensorInfo& t : f.tensors())
    if (t.name.ends_with(kCounts) && !f.find_tensor(t.name.substr(0, t.name.size() - kCounts.size()) + ".in_sum2"))
      ggl::fail("{}: importance matrix has {} but no matching .in_sum2", path, t.name);
  if (file.entries.empty())
    ggl::fail("{}: not an importance matrix (no <tensor>.in_sum2 / <tensor>.counts tensors)", path);
  return file;
}

}  // namespace

ImatrixFile ImatrixFile::read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ggl::fail("{}: cannot open the importance matrix ({})", path, std::strerror(errno));
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0 ? read_gguf(path) : read_legacy(path);
}

}  // namespace latte::convert
