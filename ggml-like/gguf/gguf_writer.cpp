// GGUF v3 writer: validates everything up front, streams tensors one at a time into a temporary
// file next to the target, and publishes it with fsync + rename so readers never see half a file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>

#include "ggml-like/gguf/gguf.h"

namespace ggl {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" as a little-endian u32
constexpr uint32_t kVersion = 3;
constexpr size_t kMaxTensorName = 63;  // ggml's GGML_MAX_NAME (64) includes the terminating NUL

uint64_t pad_to(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// A temporary file in the target's directory that is deleted unless commit() succeeds.
class TempFile {
 public:
  explicit TempFile(const std::string& target) : target_(target) {
    static std::atomic<unsigned> counter{0};
    // O_EXCL with a pid + counter suffix: concurrent writers never share a temp file, and the
    // default 0666 mode passes through the umask like any other created file.
    for (int attempt = 0; attempt < 100; ++attempt) {
      path_ = fmt::format("{}.tmp.{}.{}", target, ::getpid(), counter.fetch_add(1));
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ >= 0) return;
      if (errno != EEXIST) fail("{}: cannot create temporary file {}: {}", target, path_, std::strerror(errno));
    }
    fail("{}: cannot create a unique temporary file next to it", target);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }

  void write_all(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        fail("{}: write failed: {}", target_, std::strerror(errno));
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  }

  // Makes the bytes durable, then atomically replaces the target.
  void commit() {
    if (::fsync(fd_) != 0) fail("{}: fsync failed: {}", target_, std::strerror(errno));
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("{}: close failed: {}", target_, std::strerror(errno));
    if (::rename(path_.c_str(), target_.c_str()) != 0)
      fail("{}: cannot rename {} over it: {}", target_, path_, std::strerror(errno));
    committed_ = true;
    // Best effort: persist the directory entry too. The file is complete and in place either way.
    std::string dir = target_.find('/') == std::string::npos ? "." : target_.substr(0, target_.rfind('/') + 1);
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  std::string target_;
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

// Buffers the many small header writes; large blocks go straight through.
class Sink {
 public:
  explicit Sink(TempFile& file) : file_(file) { buf_.reserve(kBuffer); }

  void bytes(const void* data, size_t n) {
    if (buf_.size() + n > kBuffer) flush();
    if (n >= kBuffer) {
      file_.write_all(data, n);
    } else {
      const auto* p = static_cast<const uint8_t*>(data);
      buf_.insert(buf_.end(), p, p + n);
    }
    written_ += n;
  }
  template <typename T>
  void pod(T v) {
    bytes(&v, sizeof v);
  }
  void string(const std::string& s) {
    pod<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void zeros(size_t n) {
    static constexpr uint8_t kZeros[256] = {};
    while (n > 0) {
      size_t k = std::min(n, sizeof kZeros);
      bytes(kZeros, k);
      n -= k;
    }
  }
  void flush() {
    if (!buf_.empty()) file_.write_all(buf_.data(), buf_.size());
    buf_.clear();
  }
  uint64_t written() const { return written_; }

 private:
  static constexpr size_t kBuffer = 1 << 20;
  TempFile& file_;
  std::vector<uint8_t> buf_;
  uint64_t written_ = 0;
};

// Rejects metadata the reader would refuse, so the writer never produces an unreadable file.
void check_value(const Value& v, const std::string& key, int depth) {
  const auto* arr = std::get_if<Array>(&v.data);
  if (!arr) return;
  if (depth >= kMaxArrayDepth) fail("gguf writer: metadata key '{}' nests arrays deeper than {}", key, kMaxArrayDepth);
  for (size_t i = 0; i < arr->items.size(); ++i) {
    if (arr->items[i].type() != arr->element_type)
      fail("gguf writer: metadata key '{}' item {} is {} in an array of {}", key, i,
           value_type_name(arr->items[i].type()), value_type_name(arr->element_type));
    check_value(arr->items[i], key, depth + 1);
  }
}

void put_value(Sink& out, const Value& v) {
  std::visit(
      [&](const auto& x) {
        using S = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<S, std::string>) {
          out.string(x);
        } else if constexpr (std::is_same_v<S, Array>) {
          out.pod<uint32_t>(static_cast<uint32_t>(x.element_type));
          out.pod<uint64_t>(x.items.size());
          for (const Value& item : x.items) put_value(out, item);
        } else if constexpr (std::is_same_v<S, bool>) {
          out.pod<uint8_t>(x ? 1 : 0);
        } else {
          out.pod<S>(x);
        }
      },
      v.data);
}

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment), metadata_("gguf writer") {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    fail("gguf writer: alignment {} is not a power of two", alignment);
}

void GgufWriter::add_tensor(std::string name, Type type, std::vector<int64_t> ne, TensorSource source) {
  if (name.empty()) fail("gguf writer: tensor with an empty name");
  if (name.size() > kMaxTensorName) fail("gguf writer: tensor name '{}' is longer than {} bytes", name, kMaxTensorName);
  for (const PendingTensor& t : tensors_)
    if (t.info.name == name) fail("gguf writer: duplicate tensor name '{}'", name);
  if (ne.empty() || ne.size() > static_cast<size_t>(kMaxDims))
    fail("gguf writer: tensor '{}' has {} dimensions (1..{} supported)", name, ne.size(), kMaxDims);
  auto tr = type_traits(static_cast<uint32_t>(type));
  if (!tr) fail("gguf writer: tensor '{}' has unknown ggml type {}", name, static_cast<uint32_t>(type));
  if (!source) fail("gguf writer: tensor '{}' has no data source", name);

  TensorInfo info;
  info.name = std::move(name);
  info.type = type;
  info.n_dims = static_cast<int>(ne.size());
  int64_t elements = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 1) fail("gguf writer: tensor '{}' has invalid dimension {} = {}", info.name, d, ne[d]);
    if (__builtin_mul_overflow(elements, ne[d], &elements))
      fail("gguf writer: tensor '{}' element count overflows", info.name);
    info.ne[d] = ne[d];
  }
  if (info.ne[0] % tr->block_size != 0)
    fail("gguf writer: tensor '{}' row of {} elements is not a multiple of {}'s block size {}", info.name, info.ne[0],
         tr->name, tr->block_size);
  uint64_t nbytes;
  if (__builtin_mul_overflow(static_cast<uint64_t>(elements / tr->block_size), tr->block_bytes, &nbytes))
    fail("gguf writer: tensor '{}' byte size overflows", info.name);
  info.nbytes = nbytes;
  tensors_.push_back({std::move(info), std::move(source)});
}

void GgufWriter::add_tensor(std::string name, Type type, std::vector<int64_t> ne, const void* data) {
  if (!data) fail("gguf writer: tensor '{}' has no data", name);
  add_tensor(std::move(name), type, std::move(ne),
             [data](uint8_t* dst, size_t nbytes) { std::memcpy(dst, data, nbytes); });
}

void GgufWriter::write(const std::string& path) {
  // Everything that can be validated is validated before the first byte is written.
  if (path.empty()) fail("gguf writer: empty output path");
  std::vector<std::pair<std::string, const Value*>> entries;
  entries.reserve(metadata_.entries().size() + 1);
  for (const auto& [key, value] : metadata_.entries()) {
    if (key.empty()) fail("{}: empty metadata key", path);
    check_value(value, key, 0);
    entries.emplace_back(key, &value);
  }
  const Value alignment_value{alignment_};
  if (const Value* a = metadata_.find("general.alignment")) {
    const auto* u = std::get_if<uint32_t>(&a->data);
    if (!u) fail("{}: metadata general.alignment is {}, expected u32", path, value_type_name(a->type()));
    if (*u != alignment_)
      fail("{}: metadata general.alignment {} differs from the writer's alignment {}", path, *u, alignment_);
  } else if (alignment_ != kDefaultAlignment) {
    entries.emplace_back("general.alignment", &alignment_value);
  }

  // Offsets: each tensor starts aligned, in add_tensor order.
  std::vector<uint64_t> offsets;
  offsets.reserve(tensors_.size());
  uint64_t data_bytes = 0;
  size_t largest = 0;
  for (const PendingTensor& t : tensors_) {
    offsets.push_back(data_bytes);
    data_bytes += pad_to(t.info.nbytes, alignment_);
    largest = std::max(largest, t.info.nbytes);
  }

  TempFile file(path);
  Sink out(file);
  out.pod<uint32_t>(kMagic);
  out.pod<uint32_t>(kVersion);
  out.pod<uint64_t>(tensors_.size());
  out.pod<uint64_t>(entries.size());
  for (const auto& [key, value] : entries) {
    out.string(key);
    out.pod<uint32_t>(static_cast<uint32_t>(value->type()));
    put_value(out, *value);
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const TensorInfo& info = tensors_[i].info;
    out.string(info.name);
    out.pod<uint32_t>(static_cast<uint32_t>(info.n_dims));
    for (int d = 0; d < info.n_dims; ++d) out.pod<uint64_t>(static_cast<uint64_t>(info.ne[d]));
    out.pod<uint32_t>(static_cast<uint32_t>(info.type));
    out.pod<uint64_t>(offsets[i]);
  }

  if (!tensors_.empty()) {
    out.zeros(pad_to(out.written(), alignment_) - out.written());
    // One buffer, reused: memory stays at the largest tensor however big the model is.
    std::unique_ptr<uint8_t[]> buffer(new uint8_t[largest]);
    for (const PendingTensor& t : tensors_) {
      t.source(buffer.get(), t.info.nbytes);
      out.bytes(buffer.get(), t.info.nbytes);
      out.zeros(pad_to(t.info.nbytes, alignment_) - t.info.nbytes);
    }
  }
  out.flush();
  file.commit();
}

}  // namespace ggl
