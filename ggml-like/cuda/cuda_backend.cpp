#include "ggml-like/cuda/cuda_backend.h"

#include <cublas_v2.h>

#include <algorithm>

#include "ggml-like/core/error.h"
#include "ggml-like/cuda/cuda_graph_replay.h"
#include "ggml-like/cuda/cuda_ops.h"

namespace ggl {

struct CudaBackend::State {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  void* cublas_workspace = nullptr;
};

// cuBLAS's own workspace: with one it never allocates inside a captured graph (cuda_graph_replay.h).
constexpr size_t kCublasWorkspace = 32u << 20;

CudaBackend::CudaBackend(int device)
    : device_(device), name_("cuda" + std::to_string(device)), state_(new State), replay_(new cuda::GraphReplay) {
  cuda::check(cudaSetDevice(device_), "cudaSetDevice");
  cuda::check(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  if (cublasCreate(&state_->cublas) != CUBLAS_STATUS_SUCCESS) fail("cuda: cublasCreate failed on {}", name_);
  cuda::check(cudaMalloc(&state_->cublas_workspace, kCublasWorkspace), "cudaMalloc (cuBLAS workspace)");
  if (cublasSetWorkspace(state_->cublas, state_->cublas_workspace, kCublasWorkspace) != CUBLAS_STATUS_SUCCESS)
    fail("cuda: cublasSetWorkspace failed on {}", name_);
}

CudaBackend::~CudaBackend() {
  if (state_->stream) cudaStreamSynchronize(state_->stream);
  replay_.reset();
  arena_.reset();
  work_.reset();
  if (state_->cublas_workspace) cudaFree(state_->cublas_workspace);
  if (state_->cublas) cublasDestroy(state_->cublas);
  if (state_->stream) cudaStreamDestroy(state_->stream);
}

void* CudaBackend::allocate_bytes(size_t bytes) {
  void* p = nullptr;
  cudaSetDevice(device_);
  return cudaMalloc(&p, bytes) == cudaSuccess ? p : nullptr;
}

void CudaBackend::free_bytes(void* p) { cudaFree(p); }

void CudaBackend::upload(void* dst, const void* host_src, size_t n) {
  cuda::check(cudaMemcpyAsync(dst, host_src, n, cudaMemcpyHostToDevice, state_->stream), "upload");
}

void CudaBackend::download(void* host_dst, const void* src, size_t n) const {
  cuda::check(cudaMemcpyAsync(host_dst, src, n, cudaMemcpyDeviceToHost, state_->stream), "download");
}

void CudaBackend::synchronize() { cuda::check(cudaStreamSynchronize(state_->stream), "synchronize"); }

bool CudaBackend::supports_op(const Tensor& node) const { return cuda::supports(node); }

void CudaBackend::compute(Graph& graph) {
  cuda::check(cudaSetDevice(device_), "cudaSetDevice");
  if (graph.batch_invariant()) fail("{}: batch-invariant graphs (--deterministic) run on the CPU only", name_);
  for (const Tensor* n : graph.nodes())
    if (!supports_op(*n)) fail("{}: no kernel for {} '{}'", name_, op_name(n->op), n->name);
  for (const Tensor& t : graph.tensors())
    if (t.op == Op::kLeaf && t.data && !holds(t.data))
      fail("{}: leaf '{}' is not in this device's memory", name_, t.name);
  const ArenaPlan& plan = plans_.plan(graph);
  if (!arena_ || arena_->size() < plan.size) {
    synchronize();  // kernels of the last graph may still read the old arena
    arena_.reset();
    arena_ = allocate(plan.size);
  }
  bind_arena(graph, plan, arena_->base(), name_);
  // One work buffer for the kernels that need scratch (the products' dequantized weights, the MLA
  // decode's partial states): they run in stream order, each done with it before the next starts.
  size_t work = 0;
  for (const Tensor* n : graph.nodes())
    work = std::max({work, cuda::matmul_work_bytes(*n), cuda::attention_work_bytes(*n)});
  if (work > 0 && (!work_ || work_->size() < work)) {
    synchronize();  // kernels of the last graph may still use the old buffer
    work_.reset();
    work_ = allocate(work);
  }
  void* work_base = work_ ? work_->base() : nullptr;
  const cuda::MatmulWork mm{state_->stream, state_->cublas, work_base, work_ ? work_->size() : 0};
  replay_->run(graph, {arena_->base(), work_base}, state_->stream, [&] {
    for (const Tensor* n : graph.nodes()) {
      if (cuda::run_graph_op(*n, state_->stream, work_base)) continue;
      switch (n->op) {
        case Op::kMulMat:
        case Op::kMulMatT:
        case Op::kMulMatId: cuda::run_matmul(*n, mm); break;
        case Op::kGetRows: cuda::run_get_rows(*n, state_->stream); break;
        default: cuda::run_elementwise(*n, state_->stream);
      }
    }
  });
}

namespace cuda {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail("cuda: {}: {}", what, cudaGetErrorString(e));
}

Shape shape_of(const Tensor& t) {
  return {{t.ne[0], t.ne[1], t.ne[2], t.ne[3]},
          {static_cast<int64_t>(t.nb[0]), static_cast<int64_t>(t.nb[1]), static_cast<int64_t>(t.nb[2]),
           static_cast<int64_t>(t.nb[3])}};
}

bool run_graph_op(const Tensor& node, cudaStream_t stream, void* work) {
  switch (node.op) {
    case Op::kRope: run_rope(node, stream); return true;
    case Op::kTopK: run_top_k(node, stream); return true;
    case Op::kConcat:
    case Op::kCont:
    case Op::kCopy:
    case Op::kSumRows: run_rows(node, stream); return true;
    case Op::kFlashAttn: run_attention(node, stream, work); return true;
    default: return false;
  }
}

bool supports(const Tensor& node) {
  switch (node.op) {  // families whose operands are not all f32 rows check their own
    case Op::kMulMat:
    case Op::kMulMatT:
    case Op::kMulMatId: return supports_matmul(node);
    case Op::kGetRows: return supports_get_rows(node);
    case Op::kRope: return supports_rope(node);
    case Op::kTopK: return supports_top_k(node);
    case Op::kConcat:
    case Op::kCont:
    case Op::kCopy:
    case Op::kSumRows: return supports_rows(node);
    case Op::kFlashAttn: return supports_attention(node);
    default: break;
  }
  const auto f32_rows = [](const Tensor* t) { return !t || (t->type == Type::F32 && t->rows_contiguous()); };
  for (const Tensor* s : node.src)
    if (!f32_rows(s)) return false;
  if (!f32_rows(&node)) return false;
  switch (node.op) {
    case Op::kRmsNorm:
    case Op::kSoftmax:
    case Op::kAdd:
    case Op::kMul:
    case Op::kDiv:
    case Op::kScale:
    case Op::kSilu:
    case Op::kSigmoid:
    case Op::kSwiglu: return true;
    default: return false;
  }
}

}  // namespace cuda
}  // namespace ggl
