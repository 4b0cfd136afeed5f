#include "convert/page_release.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace latte::convert {

void release_file_pages(const void* data, size_t nbytes) {
  if (nbytes == 0) return;
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(data) + nbytes;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace latte::convert
