// Safetensors checkpoints: one memory-mapped file, or a directory of shards with an index.
// Format: 8-byte little-endian header length N, N bytes of JSON header mapping each tensor name to
// {dtype, shape, data_offsets: [begin, end]} (offsets relative to the end of the header), then the
// raw row-major data. Everything in the header is validated before anything trusts it; every
// defect is one ggl::Error line naming the file.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ggml-like/core/error.h"

namespace latte::convert {

enum class StDtype { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL, F8_E4M3, F8_E5M2 };

std::string_view dtype_name(StDtype d);
size_t dtype_size(StDtype d);

class SafetensorsFile;

struct StTensor {
  std::string name;
  StDtype dtype = StDtype::F32;
  std::vector<int64_t> shape;  // row-major, slowest dimension first (as written by PyTorch)
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  const SafetensorsFile* file = nullptr;

  int64_t n_elements() const;
  // "[384, 96]"
  std::string shape_text() const;
};

// One .safetensors file, mapped read-only for as long as the object lives.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<StTensor>& tensors() const { return tensors_; }
  const StTensor* find(std::string_view name) const;
  // The optional "__metadata__" string map.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Drops the mapped pages of a tensor from this process's resident set (they are re-read from
  // the page cache if touched again). Converting tensor by tensor this keeps peak RSS near the
  // size of one tensor instead of the whole checkpoint.
  void release(const StTensor& t) const { release_bytes(t.data, t.nbytes); }
  // The same for any byte range of the mapping.
  void release_bytes(const uint8_t* data, size_t nbytes) const;

 private:
  void parse();

  std::string path_;
  const uint8_t* map_ = nullptr;
  size_t size_ = 0;
  std::vector<StTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// A Hugging Face checkpoint directory: model.safetensors, or the shards named by
// model.safetensors.index.json. Tensor names are unique across shards.
class SafetensorsCheckpoint {
 public:
  explicit SafetensorsCheckpoint(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const StTensor* find(std::string_view name) const;
  // Throws "DIR: checkpoint has no tensor 'name'".
  const StTensor& get(std::string_view name) const;
  // Every tensor, in name order.
  std::vector<const StTensor*> all() const;
  uint64_t total_bytes() const { return total_bytes_; }
  size_t shard_count() const { return files_.size(); }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const StTensor*, std::less<>> by_name_;
  uint64_t total_bytes_ = 0;
};

// Converts n elements starting at element `first` of an F32, F16 or BF16 tensor to float32.
// Other dtypes are an error naming the tensor.
void read_f32(const StTensor& t, int64_t first, int64_t n, float* dst);
// read_f32, then drops the pages just read from the resident set: for one pass over a tensor, so
// that memory holds a chunk of it at a time rather than all of it. Reading them again is allowed
// (they come back from the page cache).
void read_f32_once(const StTensor& t, int64_t first, int64_t n, float* dst);

}  // namespace latte::convert
