#include "convert/page_release.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

namespace latte::convert {

void release_file_pages(const void* data, size_t nbytes, const void* mapping_begin) {
  if (nbytes == 0) return;
  constexpr uintptr_t kFaultAroundMargin = 256 * 1024;
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = reinterpret_cast<uintptr_t>(mapping_begin);
  uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  begin = begin - lo > kFaultAroundMargin ? begin - kFaultAroundMargin : lo;
  begin = std::max(begin & ~(page - 1), lo & ~(page - 1));
  const uintptr_t end = reinterpret_cast<uintptr_t>(data) + nbytes;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace latte::convert
