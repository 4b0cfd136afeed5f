#include "ggml-like/backend/backend.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "ggml-like/core/error.h"

namespace ggl {

BackendBuffer::~BackendBuffer() {
  owner_.buffers_.erase(base());
  owner_.free_bytes(base_);
}

std::unique_ptr<BackendBuffer> Backend::allocate(size_t bytes) {
  void* p = allocate_bytes(bytes == 0 ? 1 : bytes);
  if (!p) fail("{} backend: cannot allocate {} bytes", name(), bytes);
  buffers_[static_cast<const uint8_t*>(p)] = bytes;
  return std::make_unique<BackendBuffer>(*this, p, bytes);
}

bool Backend::holds(const void* p) const {
  const auto* b = static_cast<const uint8_t*>(p);
  auto it = buffers_.upper_bound(b);
  if (it == buffers_.begin()) return false;
  --it;
  return b < it->first + it->second;
}

void* Backend::allocate_bytes(size_t bytes) {
  constexpr size_t kAlign = 64;
  return std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
}

void Backend::free_bytes(void* p) { std::free(p); }

void Backend::upload(void* dst, const void* host_src, size_t n) { std::memcpy(dst, host_src, n); }

void Backend::download(void* host_dst, const void* src, size_t n) const { std::memcpy(host_dst, src, n); }

std::shared_ptr<const PreparedWeights> Backend::prepare_weights(std::span<const OfferedWeight> weights,
                                                                const std::function<void(size_t)>& on_copied) {
  return nullptr;
}

void Backend::read(const Tensor& t, void* dst, size_t offset, size_t size) {
  if (!t.data || offset + size > t.span_bytes())
    fail("{} backend: reading {} bytes at {} from '{}' ({} bytes)", name(), size, offset, t.name, t.span_bytes());
  synchronize();
  download(dst, t.bytes() + offset, size);
  synchronize();
}

void copy_between(Backend& from, const void* src, Backend& to, void* dst, size_t n) {
  if (n == 0) return;
  if (from.memory() == Memory::kHost) {
    to.upload(dst, src, n);
  } else if (to.memory() == Memory::kHost) {
    from.download(dst, src, n);
  } else {
    std::vector<uint8_t> bounce(n);
    from.download(bounce.data(), src, n);
    from.synchronize();
    to.upload(dst, bounce.data(), n);
  }
  from.synchronize();
  to.synchronize();
}

}  // namespace ggl
