// GGUF reader: maps the file read-only and validates every field before anything trusts it.
// Every defect becomes one ggl::Error line "FILE: problem"; names taken from the file are
// escaped in messages so a hostile name cannot break the one-line format.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ggml-like/gguf/gguf.h"

namespace ggl {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32

// Bounds-checked cursor over the file's bytes. Every read names the file in its error.
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* data, size_t size) : path_(path), data_(data), size_(size) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  void need(size_t n, std::string_view what) const {
    if (n > remaining()) fail("{}: truncated file while reading {} (offset {})", path_, what, pos_);
  }

  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(std::string_view what) {
    uint64_t len = read<uint64_t>(what);
    if (len > remaining()) fail("{}: {} has length {} beyond the end of the file (offset {})", path_, what, len, pos_);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return s;
  }

  // Rejects a count of items, each at least min_item_bytes long, that cannot fit in the bytes
  // left: this bounds every allocation by the file size before anything is reserved.
  void check_count(uint64_t count, size_t min_item_bytes, std::string_view what) const {
    if (count > remaining() / min_item_bytes)
      fail("{}: absurd {} {} (only {} bytes remain at offset {})", path_, what, count, remaining(), pos_);
  }

 private:
  const std::string& path_;
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Smallest encoding of one value of the type: bounds the element count of arrays.
size_t min_value_bytes(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL: return 1;
    case ValueType::U16:
    case ValueType::I16: return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32: return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
    case ValueType::STRING: return 8;
    case ValueType::ARRAY: return 12;  // element type + count
  }
  return 1;
}

ValueType read_value_type(Cursor& c, const std::string& path, const std::string& key, std::string_view what) {
  uint32_t raw = c.read<uint32_t>(what);
  if (raw > static_cast<uint32_t>(ValueType::F64))
    fail("{}: metadata key '{}' has {} {} (unknown)", path, printable(key), what, raw);
  return static_cast<ValueType>(raw);
}

Value read_value(Cursor& c, const std::string& path, ValueType type, const std::string& key, int depth);

Array read_array(Cursor& c, const std::string& path, const std::string& key, int depth) {
  if (depth >= kMaxArrayDepth)
    fail("{}: metadata key '{}' nests arrays deeper than {}", path, printable(key), kMaxArrayDepth);
  Array arr;
  arr.element_type = read_value_type(c, path, key, "array element type");
  uint64_t n = c.read<uint64_t>("array length");
  c.check_count(n, min_value_bytes(arr.element_type), fmt::format("array length of key '{}':", printable(key)));
  arr.items.reserve(n);
  for (uint64_t i = 0; i < n; ++i) arr.items.push_back(read_value(c, path, arr.element_type, key, depth + 1));
  return arr;
}

Value read_value(Cursor& c, const std::string& path, ValueType type, const std::string& key, int depth) {
  Value v;
  switch (type) {
    case ValueType::U8: v.data = c.read<uint8_t>("u8 value"); break;
    case ValueType::I8: v.data = c.read<int8_t>("i8 value"); break;
    case ValueType::U16: v.data = c.read<uint16_t>("u16 value"); break;
    case ValueType::I16: v.data = c.read<int16_t>("i16 value"); break;
    case ValueType::U32: v.data = c.read<uint32_t>("u32 value"); break;
    case ValueType::I32: v.data = c.read<int32_t>("i32 value"); break;
    case ValueType::F32: v.data = c.read<float>("f32 value"); break;
    case ValueType::BOOL: {
      uint8_t b = c.read<uint8_t>("bool value");
      if (b > 1) fail("{}: metadata key '{}' has invalid bool byte {}", path, printable(key), b);
      v.data = b != 0;
      break;
    }
    case ValueType::STRING: v.data = c.read_string(fmt::format("string value of key '{}'", printable(key))); break;
    case ValueType::ARRAY: v.data = read_array(c, path, key, depth); break;
    case ValueType::U64: v.data = c.read<uint64_t>("u64 value"); break;
    case ValueType::I64: v.data = c.read<int64_t>("i64 value"); break;
    case ValueType::F64: v.data = c.read<double>("f64 value"); break;
  }
  return v;
}

// One tensor info record; `alignment` is already known because metadata precedes the infos.
TensorInfo read_tensor_info(Cursor& c, const std::string& path, uint64_t alignment) {
  TensorInfo t;
  t.name = c.read_string("tensor name");
  if (t.name.empty()) fail("{}: tensor with an empty name (offset {})", path, c.pos());
  const std::string name = printable(t.name);
  uint32_t n_dims = c.read<uint32_t>("tensor dimension count");
  if (n_dims == 0 || n_dims > kMaxDims)
    fail("{}: tensor '{}' has {} dimensions (1..{} supported)", path, name, n_dims, kMaxDims);
  t.n_dims = static_cast<int>(n_dims);
  uint64_t elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t ne = c.read<uint64_t>("tensor dimension");
    if (ne == 0 || ne > static_cast<uint64_t>(INT64_MAX))
      fail("{}: tensor '{}' has invalid dimension {} = {}", path, name, d, ne);
    if (__builtin_mul_overflow(elements, ne, &elements) || elements > static_cast<uint64_t>(INT64_MAX))
      fail("{}: tensor '{}' element count overflows (dimensions too large)", path, name);
    t.ne[d] = static_cast<int64_t>(ne);
  }
  uint32_t raw_type = c.read<uint32_t>("tensor type");
  auto tr = type_traits(raw_type);
  if (!tr) {
    if (auto foreign = foreign_type_name(raw_type))
      fail("{}: tensor '{}' has ggml type {} ({}), which latte does not support", path, name, raw_type, *foreign);
    fail("{}: tensor '{}' has unknown ggml type {}", path, name, raw_type);
  }
  t.type = static_cast<Type>(raw_type);
  if (t.ne[0] % tr->block_size != 0)
    fail("{}: tensor '{}' row of {} elements is not a multiple of {}'s block size {}", path, name, t.ne[0], tr->name,
         tr->block_size);
  uint64_t blocks = elements / static_cast<uint64_t>(tr->block_size);
  uint64_t nbytes;
  if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(tr->block_bytes), &nbytes))
    fail("{}: tensor '{}' byte size overflows (dimensions too large)", path, name);
  t.nbytes = nbytes;
  t.offset = c.read<uint64_t>("tensor offset");
  if (t.offset % alignment != 0)
    fail("{}: tensor '{}' data offset {} is not aligned to {}", path, name, t.offset, alignment);
  return t;
}

}  // namespace

GgufFile::GgufFile(const std::string& path) : path_(path), metadata_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: not a regular file", path);
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* m = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) fail("{}: cannot map: {}", path, std::strerror(errno));
    map_ = static_cast<const uint8_t*>(m);
    owns_mapping_ = true;
  } else {
    ::close(fd);
  }

  try {
    parse();
  } catch (...) {
    if (owns_mapping_) ::munmap(const_cast<uint8_t*>(map_), size_);
    map_ = nullptr;
    throw;
  }
}

GgufFile::GgufFile(FromMemory, std::string name, const uint8_t* data, size_t size)
    : path_(std::move(name)), metadata_(path_), map_(data), size_(size) {
  parse();
}

namespace {
// madvise over the whole pages inside t's bytes.
void advise_pages_of(const TensorInfo& t, int advice) {
  if (!t.data || t.nbytes == 0) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(t.data), end = begin + t.nbytes;
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, advice);
}
}  // namespace

void GgufFile::release(const TensorInfo& t) const {
  if (owns_mapping_) advise_pages_of(t, MADV_DONTNEED);
}

void GgufFile::advise_random(const TensorInfo& t) const {
  if (owns_mapping_) advise_pages_of(t, MADV_RANDOM);
}

std::unique_ptr<GgufFile> GgufFile::from_memory(std::string name, const void* data, size_t size) {
  if (data == nullptr && size != 0) fail("{}: no data", name);
  return std::unique_ptr<GgufFile>(
      new GgufFile(FromMemory{}, std::move(name), static_cast<const uint8_t*>(data), size));
}

void GgufFile::parse() {
  Cursor c(path_, map_, size_);
  if (size_ < 4 || c.read<uint32_t>("magic") != kMagic) fail("{}: not a GGUF file (bad magic)", path_);
  version_ = c.read<uint32_t>("version");
  if (version_ == 0x02000000 || version_ == 0x03000000) fail("{}: big-endian GGUF files are not supported", path_);
  if (version_ != 2 && version_ != 3) fail("{}: unsupported GGUF version {} (supported: 2, 3)", path_, version_);
  uint64_t n_tensors = c.read<uint64_t>("tensor count");
  uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Smallest records: key (8 + 1) + type (4) + a 1-byte value; name (8 + 1) + 1 dim (4 + 8) + type (4) + offset (8).
  c.check_count(n_kv, 8 + 1 + 4 + 1, "metadata count");
  c.check_count(n_tensors, 8 + 1 + 4 + 8 + 4 + 8, "tensor count");

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("metadata key");
    if (key.empty()) fail("{}: empty metadata key (offset {})", path_, c.pos());
    if (metadata_.has(key)) fail("{}: duplicate metadata key '{}'", path_, printable(key));
    ValueType type = read_value_type(c, path_, key, "value type");
    Value v = read_value(c, path_, type, key, 0);
    metadata_.set(std::move(key), std::move(v));
  }

  if (const Value* a = metadata_.find("general.alignment")) {
    const auto* u = std::get_if<uint32_t>(&a->data);
    if (!u) fail("{}: general.alignment is {}, expected u32", path_, value_type_name(a->type()));
    if (*u == 0 || (*u & (*u - 1)) != 0) fail("{}: general.alignment {} is not a power of two", path_, *u);
    alignment_ = *u;
  }

  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t = read_tensor_info(c, path_, alignment_);
    if (tensor_index_.count(t.name)) fail("{}: duplicate tensor name '{}'", path_, printable(t.name));
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment after the tensor infos.
  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  for (TensorInfo& t : tensors_) {
    uint64_t begin, end;
    if (__builtin_add_overflow(data_offset_, t.offset, &begin) || __builtin_add_overflow(begin, t.nbytes, &end) ||
        end > size_)
      fail("{}: tensor '{}' data (offset {}, {} bytes) lies beyond the end of the file ({} bytes)", path_,
           printable(t.name), t.offset, t.nbytes, size_);
    t.data = map_ + begin;
  }

  // Two tensors sharing bytes is never what a writer meant; a writer into one would corrupt the other.
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const TensorInfo& t : tensors_) by_offset.push_back(&t);
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& prev = *by_offset[i - 1];
    if (by_offset[i]->offset < prev.offset + prev.nbytes)
      fail("{}: tensor '{}' data overlaps tensor '{}'", path_, printable(by_offset[i]->name), printable(prev.name));
  }
}

GgufFile::~GgufFile() {
  if (owns_mapping_ && map_) ::munmap(const_cast<uint8_t*>(map_), size_);
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace ggl
