// Safetensors reader: validates the header completely, maps the data, converts rows to float32.
#include "convert/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "convert/page_release.h"
#include "ggml-like/core/fp16.h"

namespace latte::convert {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Headers of real checkpoints are a few hundred KiB; this bound keeps a corrupt length from
// making us parse gigabytes of tensor data as JSON.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct DtypeInfo {
  const char* name;
  StDtype dtype;
  size_t size;
};
constexpr DtypeInfo kDtypes[] = {
    {"F64", StDtype::F64, 8},   {"F32", StDtype::F32, 4},         {"F16", StDtype::F16, 2},
    {"BF16", StDtype::BF16, 2}, {"I64", StDtype::I64, 8},         {"I32", StDtype::I32, 4},
    {"I16", StDtype::I16, 2},   {"I8", StDtype::I8, 1},           {"U8", StDtype::U8, 1},
    {"BOOL", StDtype::BOOL, 1}, {"F8_E4M3", StDtype::F8_E4M3, 1}, {"F8_E5M2", StDtype::F8_E5M2, 1},
};

using ggl::printable;

uint64_t json_u64(const json& v, const std::string& path, const std::string& name, const char* what) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    ggl::fail("{}: tensor '{}' has a non-integer or negative {}", path, printable(name), what);
  return v.get<uint64_t>();
}

}  // namespace

std::string_view dtype_name(StDtype d) {
  for (const DtypeInfo& i : kDtypes)
    if (i.dtype == d) return i.name;
  return "?";
}

size_t dtype_size(StDtype d) {
  for (const DtypeInfo& i : kDtypes)
    if (i.dtype == d) return i.size;
  return 0;
}

int64_t StTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string StTensor::shape_text() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) ggl::fail("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    ggl::fail("{}: cannot stat: {}", path, std::strerror(e));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    ggl::fail("{}: not a safetensors file ({} bytes, shorter than the 8-byte header length)", path, size_);
  }
  void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  ::close(fd);
  if (m == MAP_FAILED) ggl::fail("{}: cannot map: {}", path, std::strerror(e));
  map_ = static_cast<const uint8_t*>(m);
  try {
    parse();
  } catch (...) {
    ::munmap(const_cast<uint8_t*>(map_), size_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(const_cast<uint8_t*>(map_), size_);
}

void SafetensorsFile::parse() {
  uint64_t header_len = 0;
  std::memcpy(&header_len, map_, 8);  // little-endian, as is every machine latte runs on
  if (header_len > size_ - 8)
    ggl::fail("{}: safetensors header length {} is beyond the end of the file ({} bytes)", path_, header_len, size_);
  if (header_len > kMaxHeaderBytes)
    ggl::fail("{}: safetensors header length {} is implausibly large", path_, header_len);
  const char* hdr = reinterpret_cast<const char*>(map_ + 8);
  json j;
  try {
    j = json::parse(hdr, hdr + header_len);
  } catch (const json::exception& ex) {
    // nlohmann's messages are one line; keep only the part after its "[json.exception...] " tag.
    std::string what = ex.what();
    if (size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    ggl::fail("{}: safetensors header is not valid JSON: {}", path_, what);
  }
  if (!j.is_object()) ggl::fail("{}: safetensors header is not a JSON object", path_);

  const uint8_t* data = map_ + 8 + header_len;
  const uint64_t data_size = size_ - 8 - header_len;
  struct Span {
    uint64_t begin, end;
    size_t tensor;
  };
  std::vector<Span> spans;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) ggl::fail("{}: __metadata__ is not a JSON object", path_);
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) ggl::fail("{}: __metadata__ value '{}' is not a string", path_, printable(m.key()));
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!v.is_object()) ggl::fail("{}: tensor '{}' entry is not a JSON object", path_, printable(name));
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string()) ggl::fail("{}: tensor '{}' has no dtype string", path_, printable(name));
    if (sh == v.end() || !sh->is_array()) ggl::fail("{}: tensor '{}' has no shape array", path_, printable(name));
    if (off == v.end() || !off->is_array() || off->size() != 2)
      ggl::fail("{}: tensor '{}' has no [begin, end] data_offsets", path_, printable(name));

    StTensor t;
    t.name = name;
    t.file = this;
    const std::string dtype = dt->get<std::string>();
    const DtypeInfo* info = nullptr;
    for (const DtypeInfo& i : kDtypes)
      if (dtype == i.name) info = &i;
    if (!info) ggl::fail("{}: tensor '{}' has unknown dtype '{}'", path_, printable(name), printable(dtype));
    t.dtype = info->dtype;
    if (sh->size() > 8) ggl::fail("{}: tensor '{}' has {} dimensions", path_, printable(name), sh->size());
    uint64_t n = 1;
    for (const json& d : *sh) {
      uint64_t dim = json_u64(d, path_, name, "dimension");
      if (dim != 0 && n > std::numeric_limits<uint64_t>::max() / 2 / dim)
        ggl::fail("{}: tensor '{}' shape overflows", path_, printable(name));
      n *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    uint64_t begin = json_u64((*off)[0], path_, name, "data offset");
    uint64_t end = json_u64((*off)[1], path_, name, "data offset");
    if (begin > end || end > data_size)
      ggl::fail("{}: tensor '{}' data_offsets [{}, {}] are outside the {} data bytes", path_, printable(name), begin,
                end, data_size);
    if (n > data_size / info->size || end - begin != n * info->size)
      ggl::fail("{}: tensor '{}' has {} data bytes but {} {} needs {}", path_, printable(name), end - begin, dtype,
                t.shape_text(), n * info->size);
    t.data = data + begin;
    t.nbytes = end - begin;
    spans.push_back({begin, end, tensors_.size()});
    tensors_.push_back(std::move(t));
  }
  // nlohmann's object keeps keys unique, so duplicate names collapse silently in parsing; the
  // overlap check below still catches two entries sharing bytes.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].begin < spans[i - 1].end)
      ggl::fail("{}: tensors '{}' and '{}' overlap in the data section", path_,
                printable(tensors_[spans[i - 1].tensor].name), printable(tensors_[spans[i].tensor].name));
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
}

const StTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::release_bytes(const uint8_t* data, size_t nbytes) const {
  release_file_pages(data, nbytes, map_);
}

SafetensorsCheckpoint::SafetensorsCheckpoint(const std::string& dir) : dir_(dir) {
  const fs::path root(dir);
  if (!fs::is_directory(root)) ggl::fail("{}: not a directory", dir);
  const fs::path index_path = root / "model.safetensors.index.json";
  const fs::path single_path = root / "model.safetensors";

  if (fs::exists(index_path)) {
    json index;
    try {
      std::ifstream in(index_path);
      index = json::parse(in);
    } catch (const json::exception& ex) {
      std::string what = ex.what();
      if (size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
      ggl::fail("{}: not valid JSON: {}", index_path.string(), what);
    }
    auto wm = index.find("weight_map");
    if (!index.is_object() || wm == index.end() || !wm->is_object() || wm->empty())
      ggl::fail("{}: no \"weight_map\" object", index_path.string());
    // Open each shard once, in the order of first mention.
    std::map<std::string, SafetensorsFile*> shards;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it.value().is_string())
        ggl::fail("{}: weight_map entry '{}' is not a file name", index_path.string(), printable(it.key()));
      std::string shard = it.value().get<std::string>();
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "..")
        ggl::fail("{}: weight_map names shard '{}', which is not a plain file name", index_path.string(),
                  printable(shard));
      if (!shards.count(shard)) {
        fs::path p = root / shard;
        if (!fs::exists(p)) ggl::fail("{}: shard listed in model.safetensors.index.json is missing", p.string());
        files_.push_back(std::make_unique<SafetensorsFile>(p.string()));
        shards[shard] = files_.back().get();
      }
      const StTensor* t = shards[shard]->find(it.key());
      if (!t)
        ggl::fail("{}: model.safetensors.index.json places tensor '{}' in this shard, but it is not there",
                  (root / shard).string(), printable(it.key()));
    }
  } else if (fs::exists(single_path)) {
    files_.push_back(std::make_unique<SafetensorsFile>(single_path.string()));
  } else if (fs::exists(root / "pytorch_model.bin") || fs::exists(root / "pytorch_model.bin.index.json")) {
    ggl::fail("{}: has only PyTorch .bin weights; latte converts safetensors checkpoints", dir);
  } else {
    ggl::fail("{}: no model.safetensors or model.safetensors.index.json", dir);
  }

  for (const auto& f : files_)
    for (const StTensor& t : f->tensors()) {
      auto [it, inserted] = by_name_.emplace(t.name, &t);
      if (!inserted) ggl::fail("{}: tensor '{}' is also in {}", f->path(), printable(t.name), it->second->file->path());
      total_bytes_ += t.nbytes;
    }
}

const StTensor* SafetensorsCheckpoint::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

const StTensor& SafetensorsCheckpoint::get(std::string_view name) const {
  const StTensor* t = find(name);
  if (!t) ggl::fail("{}: checkpoint has no tensor '{}'", dir_, printable(name));
  return *t;
}

std::vector<const StTensor*> SafetensorsCheckpoint::all() const {
  std::vector<const StTensor*> out;
  for (const auto& [name, t] : by_name_) out.push_back(t);
  return out;
}

void read_f32(const StTensor& t, int64_t first, int64_t n, float* dst) {
  if (first < 0 || n < 0 || first + n > t.n_elements())
    ggl::fail("{}: read of elements [{}, {}) outside tensor '{}' of {} elements", t.file->path(), first, first + n,
              printable(t.name), t.n_elements());
  const size_t es = dtype_size(t.dtype);
  const uint8_t* src = t.data + static_cast<size_t>(first) * es;
  switch (t.dtype) {
    case StDtype::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case StDtype::F16:
    case StDtype::BF16: {
      // The data section starts wherever the JSON header ends, so 16-bit values may sit at odd
      // addresses; convert through an aligned copy then.
      auto convert = [&](const uint16_t* p, float* out, int64_t count) {
        if (t.dtype == StDtype::F16)
          ggl::fp16_to_f32_row(p, out, count);
        else
          ggl::bf16_to_f32_row(p, out, count);
      };
      if (reinterpret_cast<uintptr_t>(src) % alignof(uint16_t) == 0) {
        convert(reinterpret_cast<const uint16_t*>(src), dst, n);
      } else {
        constexpr int64_t kChunk = 4096;
        uint16_t tmp[kChunk];
        for (int64_t i = 0; i < n; i += kChunk) {
          int64_t m = std::min(kChunk, n - i);
          std::memcpy(tmp, src + static_cast<size_t>(i) * 2, static_cast<size_t>(m) * 2);
          convert(tmp, dst + i, m);
        }
      }
      return;
    }
    default:
      ggl::fail("{}: tensor '{}' has dtype {}; latte converts F32, F16 and BF16 weights", t.file->path(),
                printable(t.name), dtype_name(t.dtype));
  }
}

void read_f32_once(const StTensor& t, int64_t first, int64_t n, float* dst) {
  read_f32(t, first, n, dst);
  const size_t es = dtype_size(t.dtype);
  t.file->release_bytes(t.data + static_cast<size_t>(first) * es, static_cast<size_t>(n) * es);
}

}  // namespace latte::convert
