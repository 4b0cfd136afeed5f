#include "src/eval/imatrix_sums.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "convert/imatrix_file.h"
#include "ggml-like/core/error.h"
#include "ggml-like/gguf/gguf.h"

namespace latte::eval {
namespace {

constexpr std::string_view kSumsSuffix = ".in_sum2", kCountsSuffix = ".counts";

}  // namespace

int64_t ImatrixEntry::zero_counts() const { return std::count(counts.begin(), counts.end(), int64_t{0}); }

// A legacy entry's values become sums of weight ncall with count ncall, as llama-imatrix loads
// them; a GGUF entry's sums and per-matrix counts are taken as they are, its calls the chunks.
ImatrixSums ImatrixSums::load(const std::string& path) {
  const convert::ImatrixFile file = convert::ImatrixFile::read(path);
  ImatrixSums s;
  s.datasets = file.datasets;
  s.chunks = file.chunks;
  s.chunk_size = file.chunk_size;
  for (const auto& [name, f] : file.entries) {
    ImatrixEntry e;
    e.n_cols = f.n_cols;
    e.sums = f.values;
    for (float count : f.counts) e.counts.insert(e.counts.end(), f.n_cols, static_cast<int64_t>(count));
    e.ncall = file.legacy ? f.ncall : static_cast<int32_t>(file.chunks);
    s.entries.emplace(name, std::move(e));
  }
  return s;
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
