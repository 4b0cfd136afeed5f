#include "src/eval/imatrix_sums.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "ggml-like/core/error.h"
#include "ggml-like/gguf/gguf.h"

namespace latte::eval {
namespace {

constexpr std::string_view kSumsSuffix = ".in_sum2", kCountsSuffix = ".counts";

// Little-endian reads of a legacy file held in memory; running past its end is an error.
class LegacyCursor {
 public:
  LegacyCursor(const std::string& path, const std::vector<char>& bytes) : path_(path), bytes_(bytes) {}
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

ImatrixSums load_legacy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ggl::fail("{}: cannot open the importance matrix ({})", path, std::strerror(errno));
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  LegacyCursor c(path, bytes);
  ImatrixSums s;
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
    ImatrixEntry e;
    e.n_cols = nval;  // the format does not say how the values split into matrices
    e.sums.resize(static_cast<size_t>(nval));
    c.take(e.sums.data(), e.sums.size() * sizeof(float), "the values of '" + name + "'");
    e.counts.assign(e.sums.size(), ncall);
    e.ncall = ncall;
    if (!s.entries.emplace(std::move(name), std::move(e)).second)
      ggl::fail("{}: corrupt importance matrix (entry {} repeats a name)", path, i);
  }
  if (!c.at_end()) {
    s.chunks = c.i32("the chunk count");
    const int32_t len = c.i32("the dataset name length");
    if (len < 0 || len > (1 << 20)) ggl::fail("{}: corrupt importance matrix (dataset name of {} bytes)", path, len);
    std::string dataset(static_cast<size_t>(len), '\0');
    c.take(dataset.data(), dataset.size(), "the dataset name");
    if (!dataset.empty()) s.datasets.push_back(std::move(dataset));
  }
  return s;
}

ImatrixSums load_gguf(const std::string& path) {
  const ggl::GgufFile f(path);
  const ggl::Metadata& md = f.metadata();
  ImatrixSums s;
  if (md.has("imatrix.datasets")) s.datasets = md.get<std::vector<std::string>>("imatrix.datasets");
  s.chunks = md.get_or<int64_t>("imatrix.chunk_count", 0);
  s.chunk_size = md.get_or<int64_t>("imatrix.chunk_size", 0);
  for (const ggl::TensorInfo& t : f.tensors()) {
    if (!t.name.ends_with(kSumsSuffix)) continue;
    const std::string name = t.name.substr(0, t.name.size() - kSumsSuffix.size());
    const ggl::TensorInfo* counts = f.find_tensor(name + std::string(kCountsSuffix));
    if (!counts) ggl::fail("{}: importance matrix has {}.in_sum2 but no {}.counts", path, name, name);
    if (t.type != ggl::Type::F32 || counts->type != ggl::Type::F32)
      ggl::fail("{}: importance matrix tensors of '{}' are not f32", path, name);
    const int64_t n_matrix = counts->n_elements();
    if (t.ne[1] * t.ne[2] * t.ne[3] != n_matrix)
      ggl::fail("{}: importance matrix entry '{}': {} sums do not match {} counts", path, name, t.n_elements(),
                n_matrix);
    ImatrixEntry e;
    e.n_cols = t.ne[0];
    const auto* sums = reinterpret_cast<const float*>(t.data);
    const auto* k = reinterpret_cast<const float*>(counts->data);
    e.sums.assign(sums, sums + t.n_elements());
    for (int64_t m = 0; m < n_matrix; ++m) e.counts.insert(e.counts.end(), e.n_cols, static_cast<int64_t>(k[m]));
    e.ncall = static_cast<int32_t>(s.chunks);
    s.entries.emplace(name, std::move(e));
  }
  if (s.entries.empty()) ggl::fail("{}: not an importance matrix (no <tensor>.in_sum2 tensors)", path);
  return s;
}

}  // namespace

int64_t ImatrixEntry::zero_counts() const { return std::count(counts.begin(), counts.end(), int64_t{0}); }

ImatrixSums ImatrixSums::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ggl::fail("{}: cannot open the importance matrix ({})", path, std::strerror(errno));
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0 ? load_gguf(path) : load_legacy(path);
}

void ImatrixSums::merge(const ImatrixSums& other) {
  for (const auto& [name, add] : other.entries) {
    auto [it, fresh] = entries.try_emplace(name, add);
    if (fresh) continue;
    ImatrixEntry& e = it->second;
    if (e.sums.size() != add.sums.size())
      ggl::fail("importance matrix entry '{}' has {} values in one input and {} in another", name, e.sums.size(),
                add.sums.size());
    for (size_t i = 0; i < e.sums.size(); ++i) e.sums[i] += add.sums[i], e.counts[i] += add.counts[i];
    e.ncall += add.ncall;
    if (e.n_cols == static_cast<int64_t>(e.sums.size())) e.n_cols = add.n_cols;  // a legacy entry learns its shape
  }
  chunks += other.chunks;
  if (chunk_size == 0) chunk_size = other.chunk_size;
  datasets.insert(datasets.end(), other.datasets.begin(), other.datasets.end());
}

ImatrixWriteReport ImatrixSums::write_gguf(const std::string& path) const {
  ggl::GgufWriter w;
  ggl::Metadata& md = w.metadata();
  md.set("general.type", ggl::Value{std::string("imatrix")});
  ggl::Array names{ggl::ValueType::STRING, {}};
  for (const std::string& d : datasets) names.items.push_back(ggl::Value{d});
  md.set("imatrix.datasets", ggl::Value{names});
  md.set("imatrix.chunk_count", ggl::Value{static_cast<uint32_t>(chunks)});
  md.set("imatrix.chunk_size", ggl::Value{static_cast<uint32_t>(chunk_size)});
  ImatrixWriteReport report;
  std::vector<std::vector<float>> counts;  // kept alive until write()
  counts.reserve(entries.size());
  for (const auto& [name, e] : entries) {
    if (e.zero_counts() == static_cast<int64_t>(e.counts.size())) {
      report.skipped.push_back(name + ": no data");
      continue;
    }
    const int64_t n_matrix = e.n_matrix();
    std::vector<float>& k = counts.emplace_back();
    for (int64_t m = 0; m < n_matrix; ++m) k.push_back(static_cast<float>(e.counts[static_cast<size_t>(m * e.n_cols)]));
    w.add_tensor(name + std::string(kSumsSuffix), ggl::Type::F32, {e.n_cols, n_matrix}, e.sums.data());
    w.add_tensor(name + std::string(kCountsSuffix), ggl::Type::F32, {1, n_matrix}, k.data());
    ++report.written;
  }
  if (report.written == 0) ggl::fail("{}: no importance matrix entry has data to write", path);
  w.write(path);
  return report;
}

ImatrixWriteReport ImatrixSums::write_legacy(const std::string& path) const {
  ImatrixWriteReport report;
  std::vector<const std::pair<const std::string, ImatrixEntry>*> kept;
  int32_t last_call = 0;
  for (const auto& entry : entries) {
    const ImatrixEntry& e = entry.second;
    const int64_t zeros = e.zero_counts(), n = static_cast<int64_t>(e.counts.size());
    if (zeros == n) {
      report.skipped.push_back(entry.first + ": no data");
    } else if (zeros > 0) {
      report.skipped.push_back(fmt::format("{}: partial data ({:.2f}%)", entry.first,
                                           100.0f * static_cast<float>(n - zeros) / static_cast<float>(n)));
    } else {
      kept.push_back(&entry);
    }
    last_call = std::max(last_call, e.ncall);
  }
  if (kept.empty()) ggl::fail("{}: no importance matrix entry has complete data to write", path);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) ggl::fail("{}: cannot write the importance matrix ({})", path, std::strerror(errno));
  auto put = [&out](int32_t v) { out.write(reinterpret_cast<const char*>(&v), sizeof v); };
  put(static_cast<int32_t>(kept.size()));
  for (const auto* entry : kept) {
    const ImatrixEntry& e = entry->second;
    put(static_cast<int32_t>(entry->first.size()));
    out.write(entry->first.data(), static_cast<std::streamsize>(entry->first.size()));
    put(e.ncall);
    put(static_cast<int32_t>(e.sums.size()));
    std::vector<float> values(e.sums.size());
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = (e.sums[i] / static_cast<float>(e.counts[i])) * static_cast<float>(e.ncall);
    out.write(reinterpret_cast<const char*>(values.data()),
              static_cast<std::streamsize>(values.size() * sizeof(float)));
  }
  put(last_call);
  const std::string dataset = datasets.empty() ? std::string() : datasets.back();
  put(static_cast<int32_t>(dataset.size()));
  out.write(dataset.data(), static_cast<std::streamsize>(dataset.size()));
  out.flush();
  if (!out) ggl::fail("{}: writing the importance matrix failed ({})", path, std::strerror(errno));
  report.written = static_cast<int64_t>(kept.size());
  return report;
}

}  // namespace latte::eval
