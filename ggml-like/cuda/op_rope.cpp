// Rope nodes to the launcher of op_rope.cu.
#include "ggml-like/cuda/cuda_ops.h"
#include "ggml-like/graph/graph.h"

namespace ggl::cuda {

bool supports_rope(const Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* pos = node.src[1];
  const Tensor* ff = node.src[2];
  return node.op == Op::kRope && float_rows(a) && float_rows(&node) && pos->type == Type::I32 &&
         pos->rows_contiguous() && (!ff || float_rows(ff)) &&
         node.params[0].i <= 12 * 1024;  // cos/sin of the pairs fit 48 KiB
}

void run_rope(const Tensor& node, cudaStream_t stream) {
  const Tensor& a = *node.src[0];
  const Tensor* ff = node.src[2];
  check(launch_rope(a.data, shape_of(a), static_cast<const int32_t*>(node.src[1]->data),
                    ff ? static_cast<const float*>(ff->data) : nullptr, node.data, shape_of(node), rope_args(node),
                    stream),
        "rope");
}

}  // namespace ggl::cuda
