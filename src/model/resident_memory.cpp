#include "src/model/resident_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ggml-like/core/error.h"

namespace latte {

size_t resident_in_memory(const void* begin, size_t bytes) {
  if (bytes == 0) return 0;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(begin) / page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(begin) + bytes - 1) / page;
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) ggl::fail("cannot open /proc/self/pagemap: {}", std::strerror(errno));
  constexpr uint64_t kPresent = uint64_t{1} << 63;
  constexpr uintptr_t kChunk = 4096;  // entries per read
  std::vector<uint64_t> entry(kChunk);
  size_t present = 0;
  for (uintptr_t p = first; p <= last; p += kChunk) {
    const uintptr_t n = std::min(kChunk, last + 1 - p);
    const ssize_t got = ::pread(fd, entry.data(), n * sizeof(uint64_t), static_cast<off_t>(p * sizeof(uint64_t)));
    if (got != static_cast<ssize_t>(n * sizeof(uint64_t))) {
      const int err = errno;
      ::close(fd);
      ggl::fail("cannot read /proc/self/pagemap: {}", got < 0 ? std::strerror(err) : "short read");
    }
    for (uintptr_t i = 0; i < n; ++i) present += (entry[i] & kPresent) != 0;
  }
  ::close(fd);
  return present * page;
}

}  // namespace latte
