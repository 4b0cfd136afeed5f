// libFuzzer target for the GGUF reader. Any input must either parse or throw ggl::Error: a crash,
// a sanitizer report, a leak or any other exception is a bug. Parsing is from memory
// (GgufFile::from_memory), so the fuzzer does no file I/O and ASan sees reads past the input.
// A parsed file is then used the way the engine uses one: typed accessors on every key, and
// every byte of every tensor read through the data pointers the reader handed out.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ggml-like/gguf/gguf.h"

namespace {

template <typename T>
void try_get(const ggl::Metadata& md, const std::string& key) {
  try {
    (void)md.get<T>(key);
  } catch (const ggl::Error&) {}
}

void exercise(const ggl::GgufFile& f) {
  const ggl::Metadata& md = f.metadata();
  for (const auto& [key, value] : md.entries()) {
    if (md.find(key) != &value) __builtin_trap();  // the index must agree with the entries
    (void)ggl::value_type_name(value.type());
    try_get<uint32_t>(md, key);
    try_get<int64_t>(md, key);
    try_get<uint8_t>(md, key);
    try_get<float>(md, key);
    try_get<bool>(md, key);
    try_get<std::string>(md, key);
    try_get<std::vector<std::string>>(md, key);
    try_get<std::vector<int32_t>>(md, key);
    try_get<std::vector<uint64_t>>(md, key);
    try_get<std::vector<float>>(md, key);
  }
  if (f.alignment() == 0 || (f.alignment() & (f.alignment() - 1)) != 0) __builtin_trap();
  uint8_t checksum = 0;
  for (const ggl::TensorInfo& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) __builtin_trap();
    if (t.n_elements() <= 0 || t.nbytes == 0 || t.offset % f.alignment() != 0) __builtin_trap();
    if (ggl::row_bytes(t.type, t.ne[0]) * static_cast<size_t>(t.n_elements() / t.ne[0]) != t.nbytes) __builtin_trap();
    for (size_t i = 0; i < t.nbytes; ++i) checksum ^= t.data[i];  // ASan flags any byte outside the input
  }
  volatile uint8_t sink = checksum;
  (void)sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto file = ggl::GgufFile::from_memory("fuzz-input", data, size);
    exercise(*file);
  } catch (const ggl::Error&) {
    // Rejected with the library's error: the expected outcome for malformed input.
  }
  return 0;
}
