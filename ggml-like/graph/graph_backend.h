// The interface between a graph and the hardware that runs it. The CPU executor is one
// implementation (cpu_backend.h); an accelerator backend (e.g. CUDA offload of selected layers)
// implements the same two calls. Graph descriptions never depend on the backend.
#pragma once
#include <cstddef>
#include <string_view>

#include "ggml-like/graph/graph.h"

namespace ggl {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // Plans memory for the graph's intermediate results and runs every node in order. Leaves must
  // have their data set. Afterwards the tensors marked as outputs can be read with read().
  virtual void compute(Graph& graph) = 0;
  // Copies `size` bytes of a computed (output) tensor, starting at byte `offset`, to host memory.
  virtual void read(const Tensor& t, void* dst, size_t offset, size_t size) const = 0;
};

}  // namespace ggl
