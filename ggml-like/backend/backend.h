// The interface between a graph and the hardware that runs it. The CPU executor is one
// implementation (cpu/cpu_backend.h); an accelerator (cuda/) implements the same calls, and the
// scheduler (scheduler.h) runs one graph across several of them. Graph descriptions never
// depend on the backend.
//
// What a backend offers:
//   memory   where its tensors' bytes live (host memory the CPU can address, or a device's own),
//            buffers it allocates there, and copies between that memory and the host;
//   ops      which nodes it can run (supports_op) and the running of a whole graph (compute);
//   speeds   how fast some kernel forms run, for callers choosing between equivalent graphs;
//   weights  copies of a model's matrices in layouts of its own, which its kernels read faster.
// Calls that move bytes or compute may return before the work is done; synchronize() waits.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string_view>

#include "ggml-like/core/types.h"
#include "ggml-like/graph/graph.h"

namespace ggl {

enum class Memory { kHost, kDevice };

class Backend;
class PagedWeights;
class ExpertExchange;

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

// How a model's graphs use a weight matrix it offers (Backend::prepare_weights). Only matrices
// that are nothing but the weights of matrix products are offered: never one whose rows are
// looked up (token embeddings) or that is also read transposed (MLA's k_b / v_b / kv_b).
enum class WeightUse {
  kProducts,    // the weights of matrix products
  kOutputHead,  // the same, and the output head: the one matrix every token reads whole
};

struct OfferedWeight {
  std::string_view name;
  Type type;  // a file type
  std::array<int64_t, kMaxDims> ne;
  const void* data;  // packed rows in host memory (a file's mapping)
  size_t nbytes;
  WeightUse use;
};

// A backend's copies of offered matrices in layouts of its own (Backend::prepare_weights), alive
// as long as this object.
class PreparedWeights {
 public:
  virtual ~PreparedWeights() = default;
  virtual size_t count() const = 0;  // matrices copied
  virtual size_t bytes() const = 0;  // what the copies take
  // Whether the matrix offered at `data` was copied.
  virtual bool copied(const void* data) const = 0;
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

  // ---- weights ---------------------------------------------------------------------------
  // The matrices a model's graphs will multiply, offered once when it is loaded: returns the
  // copies this backend keeps of those its kernels read faster in a layout of its own (llama.cpp's
  // "repack"), or nullptr (none; the default). on_copied(i) follows the copy of weights[i] (the
  // caller may release the original's memory: read again, it is slower, never wrong). The copies
  // are read by the backends they are given to (use_prepared_weights), so one set can serve every
  // session on a model.
  virtual std::shared_ptr<const PreparedWeights> prepare_weights(std::span<const OfferedWeight> weights,
                                                                 const std::function<void(size_t)>& on_copied = {});
  // From now on, reads the copies in `prepared` wherever a graph's external leaf is a copied
  // matrix (its data, type and shape); nullptr, or copies another kind of backend made: none.
  // Graphs keep the file's types and bytes, so other backends (a scheduler's devices) never see a
  // layout. By default nothing is read in place of the leaves.
  virtual void use_prepared_weights(std::shared_ptr<const PreparedWeights> prepared) {}
  // From now on, asks `pager` where the slices of the paged expert weights a graph's mul_mat_id
  // nodes read are (paged_weights.h); nullptr: none. By default a backend does not ask, and reads
  // the leaves' own data (the same bytes, outside any budget).
  virtual void use_paged_weights(std::shared_ptr<PagedWeights> pager) {}
  // From now on, completes a graph's expert_exchange nodes through `exchange`
  // (expert_exchange.h); nullptr: none, and a graph with such a node is an error. Only a backend
  // that supports kExpertExchange takes it.
  virtual void use_expert_exchange(std::shared_ptr<ExpertExchange> exchange) {}

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
