#include "src/model/page_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>

#include "ggml-like/core/error.h"

namespace latte {

namespace {

size_t os_page_bytes() {
  static const size_t bytes = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return bytes;
}

// vm.max_map_count where Linux says it, else Linux's default.
int64_t mapping_limit() {
  int64_t limit = 65530;
  std::ifstream f("/proc/sys/vm/max_map_count");
  if (f) f >> limit;
  return limit;
}

// The smallest page (in tokens) whose part for every stream is whole pages of the OS.
int64_t aligned_unit(const CacheLayout& layout, ggl::Type type) {
  int64_t unit = 1;
  for (int s = 0; s < layout.streams; ++s) {
    const size_t row = ggl::row_bytes(type, layout.width[s]);
    unit = std::lcm(unit, static_cast<int64_t>(os_page_bytes() / std::gcd(row, os_page_bytes())));
  }
  return unit;
}

int open_pool_file(size_t bytes) {
#ifdef __linux__
  const int fd = ::memfd_create("latte-cache-pool", MFD_CLOEXEC);
#else
  std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/latte-cache-XXXXXX";
  const int fd = ::mkstemp(path.data());
  if (fd >= 0) ::unlink(path.c_str());
#endif
  if (fd < 0) ggl::fail("cannot create the cache pool's memory: {}", std::strerror(errno));
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    ::close(fd);
    ggl::fail("cannot size the cache pool at {} bytes: {}", bytes, std::strerror(err));
  }
  return fd;
}

}  // namespace

int64_t CachePagePool::page_tokens_for(const Hparams& hp, ggl::Type type, int64_t tokens) {
  const CacheLayout layout = cache_layout(hp);
  const int64_t unit = aligned_unit(layout, type);
  int64_t page = (16 + unit - 1) / unit * unit;
  const int64_t parts = hp.n_layer * layout.streams;
  // Each mapped part is a mapping of its own when its neighbours are not its neighbours in the
  // pool, and splits its window's reservation: keep the worst case well inside the limit.
  const int64_t budget = mapping_limit() / 4;
  while ((tokens + page - 1) / page * parts * 2 > budget && page < (int64_t{1} << 20)) page *= 2;
  return page;
}

CachePagePool::CachePagePool(const Hparams& hp, ggl::Type type, int64_t tokens, int64_t page_tokens)
    : n_layer_(hp.n_layer), type_(type), layout_(cache_layout(hp)) {
  check_cache_type(hp, type);
  if (tokens <= 0) ggl::fail("a cache pool of {} tokens: it must hold at least one", tokens);
  if (page_tokens < 0) ggl::fail("cache pages of {} tokens: the size must be positive", page_tokens);
  const int64_t unit = aligned_unit(layout_, type);
  page_tokens_ = page_tokens == 0 ? page_tokens_for(hp, type, tokens) : (page_tokens + unit - 1) / unit * unit;
  n_pages_ = (tokens + page_tokens_ - 1) / page_tokens_;
  fd_ = open_pool_file(page_bytes() * static_cast<size_t>(n_pages_));
}

CachePagePool::~CachePagePool() {
  if (fd_ >= 0) ::close(fd_);
}

size_t CachePagePool::page_bytes() const {
  size_t bytes = 0;
  for (int s = 0; s < layout_.streams; ++s) bytes += part_bytes(s);
  return bytes * static_cast<size_t>(n_layer_);
}

size_t CachePagePool::region(int64_t layer, int stream) const {
  size_t at = 0;
  for (int64_t l = 0; l < layer; ++l)
    for (int s = 0; s < layout_.streams; ++s) at += part_bytes(s) * static_cast<size_t>(n_pages_);
  for (int s = 0; s < stream; ++s) at += part_bytes(s) * static_cast<size_t>(n_pages_);
  return at;
}

void CachePagePool::map(int64_t page, int64_t layer, int stream, uint8_t* at) const {
  const size_t bytes = part_bytes(stream);
  const auto offset = static_cast<off_t>(region(layer, stream) + static_cast<size_t>(page) * bytes);
  if (::mmap(at, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_, offset) == MAP_FAILED)
    ggl::fail("cannot map cache page {} of layer {}: {}", page, layer, std::strerror(errno));
}

void CachePagePool::unmap(int64_t layer, int stream, uint8_t* at) const {
  if (::mmap(at, part_bytes(stream), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) ==
      MAP_FAILED)
    ggl::fail("cannot unmap a cache page of layer {}: {}", layer, std::strerror(errno));
}

uint8_t* CachePagePool::reserve_window(int stream, int64_t slots) const {
  void* p = ::mmap(nullptr, part_bytes(stream) * static_cast<size_t>(slots), PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) ggl::fail("cannot reserve a cache window of {} pages: {}", slots, std::strerror(errno));
  return static_cast<uint8_t*>(p);
}

void CachePagePool::release_window(int stream, uint8_t* window, int64_t slots) const {
  ::munmap(window, part_bytes(stream) * static_cast<size_t>(slots));
}

}  // namespace latte
