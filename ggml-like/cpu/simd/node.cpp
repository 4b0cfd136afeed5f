// The per-node entry points of this instruction set: the scratch a node needs, and running it
// (op_thread.h has their meaning; cpu_backend.cpp calls them through the kernel table).
#include "ggml-like/graph/graph.h"
#include "ggml-like/cpu/simd/set_declarations.h"

namespace ggl::GGL_ISA {

CpuPathCounters g_path_counters{};

size_t node_work_bytes(const Tensor& node, int n_threads, bool batch_invariant) {
  switch (node.op) {
    case Op::kMulMat: return cpu_mul_mat_work(node, n_threads, batch_invariant);
    case Op::kMulMatId: return cpu_mul_mat_id_work(node, n_threads, batch_invariant);
    case Op::kRope: return cpu_rope_work(node, n_threads);
    case Op::kTopK: return cpu_top_k_work(node, n_threads);
    case Op::kFlashAttn: return cpu_flash_attn_work(node, n_threads, batch_invariant);
    default: return 0;
  }
}

void run_node(const Tensor& node, const CpuThread& th) {
  count_path(CpuPath::kNode, th);
  switch (node.op) {
    case Op::kLeaf:
    case Op::kView:
    case Op::kPrefetch:  // the backend hands it to the pager
    case Op::kExpertSend:
    case Op::kExpertExchange:
    case Op::kTokenGather: return;  // the backend runs it on one thread
    case Op::kGetRows: return cpu_get_rows(node, th);
    case Op::kRmsNorm: return cpu_rms_norm(node, th);
    case Op::kAdd:
    case Op::kMul:
    case Op::kDiv: return cpu_binary(node, th);
    case Op::kScale:
    case Op::kSigmoid:
    case Op::kSilu: return cpu_unary(node, th);
    case Op::kSwiglu: return cpu_swiglu(node, th);
    case Op::kSumRows: return cpu_sum_rows(node, th);
    case Op::kSoftmax: return cpu_softmax(node, th);
    case Op::kMulMat: return cpu_mul_mat(node, th);
    case Op::kMulMatT: return cpu_mul_mat_t(node, th);
    case Op::kMulMatId: return cpu_mul_mat_id(node, th);
    case Op::kRope: return cpu_rope(node, th);
    case Op::kTopK: return cpu_top_k(node, th);
    case Op::kConcat: return cpu_concat(node, th);
    case Op::kCont: return cpu_cont(node, th);
    case Op::kCopy: return cpu_copy(node, th);
    case Op::kFlashAttn: return cpu_flash_attn(node, th);
  }
}

}  // namespace ggl::GGL_ISA
