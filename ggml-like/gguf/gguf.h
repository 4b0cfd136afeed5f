// GGUF files: metadata values, tensor infos, and a memory-mapping reader.
// Spec: GGUF v3 (v2 is read too). Little-endian; tensor dims are listed fastest-first (ggml `ne`).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/core/types.h"

namespace ggl {

// Metadata value type ids as stored in the file.
enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
std::string_view value_type_name(ValueType t);

struct Value;
struct Array {
  ValueType element_type = ValueType::U8;
  std::vector<Value> items;  // for nested arrays, each item is itself an Array value
};

// One metadata value. Integers keep their stored width and signedness.
struct Value {
  using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool, std::string, Array,
                               uint64_t, int64_t, double>;
  Storage data;

  ValueType type() const { return static_cast<ValueType>(data.index()); }
};

// Arrays nested deeper than this are rejected by the reader (and never written), so a hostile
// file cannot drive the recursive parser into a stack overflow.
inline constexpr int kMaxArrayDepth = 8;
// The data-section alignment when a file has no general.alignment key.
inline constexpr uint32_t kDefaultAlignment = 32;

struct TensorInfo {
  std::string name;
  Type type = Type::F32;
  int n_dims = 0;
  int64_t ne[kMaxDims] = {1, 1, 1, 1};  // fastest-first; unused dims are 1
  uint64_t offset = 0;                  // relative to the start of the data section
  size_t nbytes = 0;
  const uint8_t* data = nullptr;  // into the mapping (nullptr for infos not from a reader)

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

// Ordered key/value metadata with typed accessors. Accessors throw ggl::Error naming the
// source (a file name) and the key for missing keys and for wrong types.
class Metadata {
 public:
  explicit Metadata(std::string source = "gguf") : source_(std::move(source)) {}

  bool has(std::string_view key) const;
  const Value* find(std::string_view key) const;
  const Value& at(std::string_view key) const;
  // Inserts or replaces; insertion order is preserved (a replaced key keeps its position).
  void set(std::string key, Value value);
  void erase(std::string_view key);

  // Supported T: any integer type (converted when the value fits), float, double, bool,
  // std::string, std::vector<std::string>, std::vector<float>, std::vector<double>,
  // std::vector<bool>, std::vector<int8_t/uint8_t/int32_t/uint32_t/int64_t/uint64_t>.
  // Errors: "SOURCE: missing metadata key 'k'", "... key 'k' is string, expected u32",
  // "... key 'k' = -1 (i32) does not fit in u32".
  template <typename T>
  T get(std::string_view key) const;
  template <typename T>
  T get_or(std::string_view key, T fallback) const {
    return has(key) ? get<T>(key) : fallback;
  }

  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::vector<std::pair<std::string, Value>> entries_;
  std::map<std::string, size_t, std::less<>> index_;
};

// A GGUF file opened for reading. Tensor data is memory-mapped, never copied.
// The constructor validates the whole file and throws ggl::Error("FILE: problem") on any defect:
// bad magic or version, truncation, lengths or counts beyond the file, unknown value or tensor
// types, bad dimensions, misaligned, out-of-bounds or overlapping tensor data, duplicate names.
class GgufFile {
 public:
  explicit GgufFile(const std::string& path);
  // Parses GGUF bytes already in memory (tests, fuzzing). Nothing is copied: `data` must stay
  // valid as long as the returned object; tensor data pointers point into it. `name` stands in
  // for the file name in errors.
  static std::unique_ptr<GgufFile> from_memory(std::string name, const void* data, size_t size);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const Metadata& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // nullptr if there is no tensor of that name.
  const TensorInfo* find_tensor(std::string_view name) const;
  size_t file_size() const { return size_; }
  // Byte offset of the data section (tensor offsets are relative to it).
  uint64_t data_offset() const { return data_offset_; }
  // Tells the system that t's bytes will not be read again (a copy replaced them): the mapping's
  // whole pages inside them leave the process's memory (the page cache may keep them; a later
  // read maps them back in). Nothing for a file parsed from memory.
  void release(const TensorInfo& t) const;
  // Tells the system that t's bytes are read rarely and at random (an expert cache reads them
  // itself): no read-ahead there, and the mapping's whole pages inside them become a region of
  // their own, which the kernel's fault-around (mapping a faulting page's cached neighbours) does
  // not cross. Nothing for a file parsed from memory.
  void advise_random(const TensorInfo& t) const;
  // What every reader of this file's metadata sees for `key` from now on (llama.cpp's
  // --override-kv); the file itself is not changed.
  void override_metadata(std::string key, Value value) { metadata_.set(std::move(key), std::move(value)); }

 private:
  struct FromMemory {};
  GgufFile(FromMemory, std::string name, const uint8_t* data, size_t size);
  void parse();

  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  Metadata metadata_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  const uint8_t* map_ = nullptr;  // the file's bytes (mapped, or borrowed with from_memory)
  size_t size_ = 0;
  bool owns_mapping_ = false;
  uint64_t data_offset_ = 0;
};

// Builds a GGUF v3 file. Tensor bytes are produced one tensor at a time while writing, so a
// converter never holds a whole model in memory (only a buffer the size of the largest tensor).
// write() goes to a temporary "<path>.tmp.*" in the same directory, fsyncs it and renames it
// over <path> only when complete: a failed write (any exception, including one thrown by a
// TensorSource) removes the temporary file and never touches <path>.
//
// Layout: header, metadata in insertion order, tensor infos in add_tensor order, then (only if
// there are tensors) zero padding to the alignment and each tensor's data, each padded to the
// alignment. general.alignment is written only when the alignment is not 32 (appended last
// unless the metadata already holds it; a metadata value that differs from the writer's
// alignment is an error). This is the layout of the reference Python writer, so rewriting a
// file's metadata and tensors reproduces it byte for byte.
class GgufWriter {
 public:
  // Fills exactly `nbytes` bytes at `dst` with the tensor's data (called once, during write()).
  using TensorSource = std::function<void(uint8_t* dst, size_t nbytes)>;

  // alignment: a power of two.
  explicit GgufWriter(uint32_t alignment = kDefaultAlignment);

  Metadata& metadata() { return metadata_; }
  // ne is fastest-first, 1..4 dims, each >= 1; ne[0] must be a multiple of the type's block
  // size; names must be unique, non-empty and shorter than 64 bytes (ggml's limit).
  void add_tensor(std::string name, Type type, std::vector<int64_t> ne, TensorSource source);
  // Convenience: copies from memory that stays valid until write() returns.
  void add_tensor(std::string name, Type type, std::vector<int64_t> ne, const void* data);

  void write(const std::string& path);

 private:
  struct PendingTensor {
    TensorInfo info;
    TensorSource source;
  };
  uint32_t alignment_;
  Metadata metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace ggl
