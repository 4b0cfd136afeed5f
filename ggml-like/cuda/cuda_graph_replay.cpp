#include "ggml-like/cuda/cuda_graph_replay.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "ggml-like/core/error.h"
#include "ggml-like/cuda/cuda_ops.h"

namespace ggl::cuda {
namespace {

void push_tensor(std::vector<int64_t>& key, const Tensor& t) {
  key.push_back(static_cast<int64_t>(t.type));
  key.push_back(reinterpret_cast<intptr_t>(t.data));
  for (int d = 0; d < kMaxDims; ++d) {
    key.push_back(t.ne[d]);
    key.push_back(static_cast<int64_t>(t.nb[d]));
  }
}

// Everything a node's launch depends on (see the header).
std::vector<int64_t> launch_key(const Graph& graph, std::initializer_list<const void*> buffers) {
  std::vector<int64_t> key;
  for (const void* b : buffers) key.push_back(reinterpret_cast<intptr_t>(b));
  for (const Tensor* n : graph.nodes()) {
    key.push_back(static_cast<int64_t>(n->op));
    push_tensor(key, *n);
    for (const Tensor::Param& p : n->params) {
      int32_t bits;
      std::memcpy(&bits, &p, sizeof bits);
      key.push_back(bits);
    }
    for (const Tensor* s : n->src) {
      key.push_back(s != nullptr);
      if (s) push_tensor(key, *s);
    }
  }
  return key;
}

// What tells kinds of graph apart (see the header).
std::vector<int64_t> identity_of(const Graph& graph) {
  std::vector<int64_t> id;
  for (const Tensor* n : graph.nodes()) id.push_back(static_cast<int64_t>(n->op));
  for (const Tensor& t : graph.tensors())
    if (t.op == Op::kLeaf) id.push_back(reinterpret_cast<intptr_t>(t.data));
  return id;
}

}  // namespace

GraphReplay::GraphReplay() {
  const char* env = std::getenv("LATTE_CUDA_GRAPHS");
  enabled_ = !(env && std::strcmp(env, "0") == 0);
}

GraphReplay::~GraphReplay() { reset(); }

void GraphReplay::reset() {
  for (Kind& k : kinds_)
    if (k.exec) cudaGraphExecDestroy(k.exec);
  kinds_.clear();
}

void GraphReplay::run(const Graph& graph, std::initializer_list<const void*> buffers, cudaStream_t stream,
                      const std::function<void()>& launch) {
  if (!enabled_) return launch();
  std::vector<int64_t> identity = identity_of(graph);
  auto kind = std::find_if(kinds_.begin(), kinds_.end(), [&](const Kind& k) { return k.identity == identity; });
  if (kind == kinds_.end()) {  // a kind seen for the first time: run it directly
    if (kinds_.size() >= kMaxKinds) reset();
    kinds_.push_back(Kind{std::move(identity), {}, nullptr});
    return launch();
  }
  std::vector<int64_t> key = launch_key(graph, buffers);
  if (kind->exec && key == kind->key) {
    check(cudaGraphLaunch(kind->exec, stream), "cudaGraphLaunch");
    ++replays_;
    return;
  }
  capture(*kind, std::move(key), stream, launch);
}

void GraphReplay::capture(Kind& kind, std::vector<int64_t> key, cudaStream_t stream,
                          const std::function<void()>& launch) {
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  bool launched = true;
  try {
    launch();
  } catch (const Error&) {
    launched = false;  // e.g. a call that capture forbids; nothing ran
  }
  cudaGraph_t captured = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &captured);
  if (!launched || ended != cudaSuccess || !captured) {
    if (captured) cudaGraphDestroy(captured);
    cudaGetLastError();  // the capture's error is not the next kernel's
    enabled_ = false;
    reset();
    return launch();  // run directly; a genuine error surfaces here
  }
  if (kind.exec) {
    cudaGraphExecUpdateResultInfo info{};
    if (cudaGraphExecUpdate(kind.exec, captured, &info) != cudaSuccess) {
      cudaGetLastError();  // refused (another topology): instantiate anew
      cudaGraphExecDestroy(kind.exec);
      kind.exec = nullptr;
    }
  }
  if (!kind.exec) {
    const cudaError_t e = cudaGraphInstantiate(&kind.exec, captured, 0);
    if (e != cudaSuccess) {
      cudaGraphDestroy(captured);
      kind.exec = nullptr;
      kind.key.clear();
      check(e, "cudaGraphInstantiate");
    }
  }
  cudaGraphDestroy(captured);
  ++captures_;
  kind.key = std::move(key);
  check(cudaGraphLaunch(kind.exec, stream), "cudaGraphLaunch");
}

}  // namespace ggl::cuda
