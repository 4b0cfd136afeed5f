// Nodes of the element-wise family to the launchers of op_elementwise.cu.
#include "ggml-like/cuda/cuda_ops.h"

#include "ggml-like/core/error.h"

namespace ggl::cuda {

void run_elementwise(const Tensor& node, cudaStream_t stream) {
  const Tensor& a = *node.src[0];
  const Tensor* b = node.src[1];
  const auto map = [&](MapFn fn, const Tensor* second, float s) {
    return launch_map(fn, a.data, shape_of(a), second ? second->data : nullptr, second ? shape_of(*second) : Shape{},
                      node.data, shape_of(node), s, stream);
  };
  cudaError_t e = cudaSuccess;
  switch (node.op) {
    case Op::kRmsNorm:
      e = launch_rms_norm(a.data, shape_of(a), node.data, shape_of(node), node.params[0].f, stream);
      break;
    case Op::kSoftmax: e = launch_softmax(a.data, shape_of(a), node.data, shape_of(node), stream); break;
    case Op::kAdd: e = map(MapFn::kAdd, b, 0); break;
    case Op::kMul: e = map(MapFn::kMul, b, 0); break;
    case Op::kDiv: e = map(MapFn::kDiv, b, 0); break;
    case Op::kScale: e = map(MapFn::kScale, nullptr, node.params[0].f); break;
    case Op::kSilu: e = map(MapFn::kSilu, nullptr, 0); break;
    case Op::kSigmoid: e = map(MapFn::kSigmoid, nullptr, 0); break;
    case Op::kSwiglu: e = map(MapFn::kSwiglu, b, 0); break;
    default: fail("cuda: {} is not an element-wise op", op_name(node.op));
  }
  check(e, op_name(node.op).data());
}

}  // namespace ggl::cuda
