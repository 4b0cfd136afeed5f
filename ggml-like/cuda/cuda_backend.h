// The CUDA backend: one device, its memory (cudaMalloc), one stream for copies and kernels, a
// cuBLAS handle, and an arena for intermediate results planned like the CPU's (graph_plan.h).
// A graph's launches are captured into a CUDA graph and replayed when it comes again
// (cuda_graph_replay.h; LATTE_CUDA_GRAPHS=0 turns that off).
// It runs the ops of cuda_ops.h; the scheduler (scheduler.h) sends it only those.
// Compiled with -DLATTE_CUDA=ON only. Not yet run on a GPU: see docs/offload.md.
#pragma once
#include <memory>
#include <string>

#include "ggml-like/backend/backend.h"
#include "ggml-like/graph/graph_plan.h"

namespace ggl::cuda {
class GraphReplay;
}

namespace ggl {

class CudaBackend final : public Backend {
 public:
  // Throws ggl::Error when the device cannot be used.
  explicit CudaBackend(int device);
  ~CudaBackend() override;

  std::string_view name() const override { return name_; }
  Memory memory() const override { return Memory::kDevice; }
  void upload(void* dst, const void* host_src, size_t n) override;
  void download(void* host_dst, const void* src, size_t n) const override;
  void synchronize() override;
  bool supports_op(const Tensor& node) const override;
  void compute(Graph& graph) override;

 protected:
  void* allocate_bytes(size_t bytes) override;
  void free_bytes(void* p) override;

 private:
  struct State;
  int device_;
  std::string name_;
  std::unique_ptr<State> state_;
  PlanCache plans_;
  std::unique_ptr<BackendBuffer> arena_;
  // Scratch of the kernels that need it: the products' (cuda::matmul_work_bytes), the MLA
  // decode's partial states (cuda::attention_work_bytes).
  std::unique_ptr<BackendBuffer> work_;
  std::unique_ptr<cuda::GraphReplay> replay_;
};

}  // namespace ggl
