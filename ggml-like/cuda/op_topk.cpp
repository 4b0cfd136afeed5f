// Top-k nodes to the launcher of op_topk.cu.
#include "ggml-like/cuda/cuda_ops.h"
#include "ggml-like/graph/graph.h"

namespace ggl::cuda {

bool supports_top_k(const Tensor& node) {
  return node.op == Op::kTopK && float_rows(node.src[0]) && node.src[0]->ne[0] <= kTopKMaxValues &&
         node.type == Type::I32 && node.rows_contiguous();
}

void run_top_k(const Tensor& node, cudaStream_t stream) {
  const Tensor& a = *node.src[0];
  const TopKParams p = top_k_params(node);
  check(launch_top_k(a.data, shape_of(a), node.data, shape_of(node), p.k, p.n_groups, p.n_groups_used, stream),
        "top_k");
}

}  // namespace ggl::cuda
