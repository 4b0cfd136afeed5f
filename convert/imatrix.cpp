#include "convert/imatrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "ggml-like/core/error.h"

namespace latte::convert {
namespace {

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ggl::fail("{}: cannot open the importance matrix ({})", path, std::strerror(errno));
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

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

void check_finite(const std::string& path, const std::string& name, const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) ggl::fail("{}: importance matrix entry '{}' holds a non-finite value", path, name);
}

}  // namespace

ImportanceMatrix ImportanceMatrix::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ggl::fail("{}: cannot open the importance matrix ({})", path, std::strerror(errno));
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0 ? load_gguf(path) : load_legacy(path);
}

ImportanceMatrix ImportanceMatrix::load_legacy(const std::string& path) {
  const std::vector<char> bytes = read_all(path);
  Cursor c(path, bytes);
  ImportanceMatrix m;
  m.path_ = path;
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
    if (nval < 1) ggl::fail("{}: corrupt importance matrix (entry '{}' has {} values)", path, name, nval);
    std::vector<float> v(static_cast<size_t>(nval));
    c.take(v.data(), v.size() * sizeof(float), "the values of '" + name + "'");
    if (ncall > 0)
      for (float& x : v) x /= static_cast<float>(ncall);
    check_finite(path, name, v);
    if (!m.entries_.emplace(std::move(name), std::move(v)).second)
      ggl::fail("{}: corrupt importance matrix (entry {} repeats a name)", path, i);
  }
  if (!c.at_end()) {  // newer files end with the chunk count and the dataset's name
    m.chunks_ = c.i32("the chunk count");
    const int32_t len = c.i32("the dataset name length");
    if (len < 0 || len > (1 << 20)) ggl::fail("{}: corrupt importance matrix (dataset name of {} bytes)", path, len);
    m.dataset_.resize(static_cast<size_t>(len));
    c.take(m.dataset_.data(), m.dataset_.size(), "the dataset name");
    if (!c.at_end()) ggl::fail("{}: corrupt importance matrix (bytes after the dataset name)", path);
  }
  return m;
}

ImportanceMatrix ImportanceMatrix::load_gguf(const std::string& path) {
  const ggl::GgufFile f(path);
  ImportanceMatrix m;
  m.path_ = path;
  const ggl::Metadata& md = f.metadata();
  if (md.has("imatrix.datasets")) {
    const auto datasets = md.get<std::vector<std::string>>("imatrix.datasets");
    if (!datasets.empty()) m.dataset_ = datasets.front();
  }
  m.chunks_ = md.get_or<int64_t>("imatrix.chunk_count", 0);
  for (const ggl::TensorInfo& sums : f.tensors()) {
    if (!sums.name.ends_with(".in_sum2")) continue;
    const std::string name = sums.name.substr(0, sums.name.size() - std::strlen(".in_sum2"));
    const ggl::TensorInfo* counts = f.find_tensor(name + ".counts");
    if (!counts) ggl::fail("{}: importance matrix has {}.in_sum2 but no {}.counts", path, name, name);
    if (sums.type != ggl::Type::F32 || counts->type != ggl::Type::F32)
      ggl::fail("{}: importance matrix tensors of '{}' are not f32", path, name);
    const int64_t n_matrix = counts->n_elements(), n = sums.n_elements();
    if (n_matrix < 1 || n % n_matrix != 0 || sums.ne[1] * sums.ne[2] * sums.ne[3] != n_matrix)
      ggl::fail("{}: importance matrix entry '{}': {} sums do not match {} counts", path, name, n, n_matrix);
    const int64_t ne0 = n / n_matrix;
    const auto* s = reinterpret_cast<const float*>(sums.data);
    const auto* k = reinterpret_cast<const float*>(counts->data);
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t j = 0; j < n_matrix; ++j)
      for (int64_t i = 0; i < ne0; ++i) v[j * ne0 + i] = k[j] > 0.0f ? s[j * ne0 + i] / k[j] : 1.0f;
    check_finite(path, name, v);
    m.entries_.emplace(name, std::move(v));
  }
  for (const ggl::TensorInfo& t : f.tensors())
    if (t.name.ends_with(".counts") && !f.find_tensor(t.name.substr(0, t.name.size() - 7) + ".in_sum2"))
      ggl::fail("{}: importance matrix has {} but no matching .in_sum2", path, t.name);
  if (m.entries_.empty())
    ggl::fail("{}: not an importance matrix (no <tensor>.in_sum2 / <tensor>.counts tensors)", path);
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
