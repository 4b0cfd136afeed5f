// The interface between a graph and the hardware that runs it. The CPU executor is one
// implementation (cpu/cpu_backend.h); an accelerator (cuda/) implements the same calls, and the
// scheduler (scheduler.h) runs one graph across several of them. Graph descriptions never
// depend on the backend.
//
// What a backend offers:
//   memory   where its tensors' bytes live (host memory the CPU can address, or a device's own),
//            buffers it allocates there, and copies between that memory and the host;
//   ops      which nodes it can run (supports_op) and the running of a whole graph (compute);
//   speeds   how fast some kernel forms run, for callers choosing between equivalent graphs.
// Calls that move bytes or compute may return before the work is done; synchronize() waits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string_view>

#include "ggml-like/core/types.h"
#include "ggml-like/graph/graph.h"

namespace ggl {

enum class Memory { kHost, kDevice };

class Backend;

// Bytes a backend allocated in its memory (weights it holds, copies of activations). Freed with
// the buffer; the backend must outlive it.
class BackendBuffer {
 public:
  BackendBuffer(Backend& owner, void* base, size_t size) : owner_(owner), base_(base), size_(size) {}
  ~BackendBuffer();
  BackendBuffer(const BackendBuffer&) = delete;
  BackendBuffer& operator=(const BackendBuffer&) = delete;

  Backend& owner() const { return owner_; }
  uint8_t* base() const { return static_cast<uint8_t*>(base_); }
  size_t size() const { return size_; }

 private:
  Backend& owner_;
  void* base_;
  size_t size_;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // ---- memory --------------------------------------------------------------------------
  virtual Memory memory() const { return Memory::kHost; }
  // `bytes` of this backend's memory (aligned for any kernel). Throws ggl::Error when it cannot.
  std::unique_ptr<BackendBuffer> allocate(size_t bytes);
  // Whether p lies in a live buffer allocated by this backend (where a leaf's bytes live).
  bool holds(const void* p) const;
  // Bytes between host memory and this backend's memory (plain copies for host memory).
  virtual void upload(void* dst, const void* host_src, size_t n);
  virtual void download(void* host_dst, const void* src, size_t n) const;
  // Waits until every copy and computation issued to this backend has finished.
  virtual void synchronize() {}

  // ---- ops -------------------------------------------------------------------------------
  virtual bool supports_op(const Tensor& node) const = 0;
  // Plans memory for the graph's intermediate results and runs every node in order. Leaves must
  // have their data set (in this backend's memory, or host memory for a host backend). Afterwards
  // the tensors marked as outputs can be read with read().
  virtual void compute(Graph& graph) = 0;
  // Copies `size` bytes of a computed (output) tensor, starting at byte `offset`, to host memory
  // (waits for the computation).
  virtual void read(const Tensor& t, void* dst, size_t offset, size_t size);

  // ---- speeds ----------------------------------------------------------------------------
  // Multiply-adds per second of two kernel forms relative to this backend's float32 attention
  // kernel (1: as fast), for choosing between equivalent graphs (MLA's absorbed and naive forms):
  // matrix products with weights of type w and rows of k elements, and multi-head attention with
  // key/value head sizes dk/dv and heads_per_kv query heads on each KV head (MLA's absorbed form: all
  // heads on one latent cache).
  virtual double matmul_speed(Type w, int64_t k) const { return 1.0; }
  virtual double attention_speed(int64_t dk, int64_t dv, int64_t heads_per_kv = 1) const { return 1.0; }

 protected:
  // The raw allocation behind allocate() / BackendBuffer (host memory by default).
  virtual void* allocate_bytes(size_t bytes);
  virtual void free_bytes(void* p);

 private:
  friend class BackendBuffer;
  std::map<const uint8_t*, size_t> buffers_;  // live buffers: base -> size
};

// Copies n bytes from src (in from's memory) to dst (in to's memory): directly where one side is
// host memory, through a host bounce between two devices. Both backends are synchronized after.
void copy_between(Backend& from, const void* src, Backend& to, void* dst, size_t n);

}  // namespace ggl
