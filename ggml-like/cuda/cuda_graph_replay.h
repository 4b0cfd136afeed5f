// CUDA graphs for the CUDA backend: the launches of one compute() are captured into a cudaGraph
// and replayed, so that a decode step costs one graph launch instead of a launch per node.
//
// Why replaying is sound: every launch depends only on what the key holds (each node's op, type,
// shape, strides, parameters and data pointer, the same of its sources, and the arena and work
// buffers) and reads the values behind those pointers when it runs, not when it was captured.
// So a graph whose key equals the captured one would launch exactly the captured kernels with the
// captured arguments: the replay does that, reading this step's inputs and cache. A graph of the
// same kind with another key (a decode step writes the next cache row and sees one more key) is
// captured again and patched into the instantiated graph with cudaGraphExecUpdate (instantiated
// anew when the update is refused).
//
// A kind is the op sequence and the leaves' data pointers (weights, caches, staged inputs): the
// scheduler runs several parts per token on this backend (each layer's, between CPU parts), each
// its own kind with its own instantiated graph. The first graph of a kind runs directly: only a
// kind that comes again is captured, so one-off graphs pay no instantiation. A capture that fails
// (a kernel's glue that synchronises or allocates, which capture forbids) turns graphs off for the
// backend and runs directly. LATTE_CUDA_GRAPHS=0 turns them off.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "ggml-like/graph/graph.h"

namespace ggl::cuda {

class GraphReplay {
 public:
  GraphReplay();  // reads LATTE_CUDA_GRAPHS
  ~GraphReplay();
  GraphReplay(const GraphReplay&) = delete;
  GraphReplay& operator=(const GraphReplay&) = delete;

  // Enqueues graph's launches on stream: launch() directly, or replayed. `buffers` are pointers
  // the launches use beyond the graph's tensors (the arena, the work buffer).
  void run(const Graph& graph, std::initializer_list<const void*> buffers, cudaStream_t stream,
           const std::function<void()>& launch);
  bool enabled() const { return enabled_; }
  // Graph launches since construction that replayed without a new capture, and captures.
  int64_t replays() const { return replays_; }
  int64_t captures() const { return captures_; }

 private:
  struct Kind {
    std::vector<int64_t> identity;  // op sequence and leaves' data pointers
    std::vector<int64_t> key;       // of the graph captured into exec (empty: none)
    cudaGraphExec_t exec = nullptr;
  };
  static constexpr size_t kMaxKinds = 256;  // past this, all are dropped (a model has a few per layer)
  void reset();
  void capture(Kind& kind, std::vector<int64_t> key, cudaStream_t stream, const std::function<void()>& launch);
  bool enabled_;
  std::vector<Kind> kinds_;
  int64_t replays_ = 0, captures_ = 0;
};

}  // namespace ggl::cuda
