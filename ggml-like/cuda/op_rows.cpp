// Nodes of the row movers (concat, cont, copy, sum_rows) to the launchers of op_rows.cu.
#include "ggml-like/core/error.h"
#include "ggml-like/cuda/cuda_ops.h"

namespace ggl::cuda {
std::optional<Elem> elem_of(Type t) {
  switch (t) {
    case Type::F32: return Elem::kF32;
    case Type::F16: return Elem::kF16;
    case Type::BF16: return Elem::kBF16;
    case Type::Q8_0: return Elem::kQ8_0;
    default: return std::nullopt;
  }
}

bool readable_rows(const Tensor* t) {
  if (!t || !elem_of(t->type) || !t->rows_contiguous()) return false;
  const size_t align = t->type == Type::F32 ? 4 : t->type == Type::Q8_0 ? 1 : 2;  // q8_0: byte loads
  for (int d = 1; d < kMaxDims; ++d)
    if (t->nb[d] % align != 0) return false;
  return t->view_offset % align == 0;
}

bool float_rows(const Tensor* t) { return t && t->type == Type::F32 && readable_rows(t); }

bool supports_rows(const Tensor& node) {
  const Tensor* a = node.src[0];
  switch (node.op) {
    case Op::kConcat: return float_rows(a) && float_rows(node.src[1]) && float_rows(&node);
    case Op::kSumRows: return float_rows(a) && float_rows(&node);
    case Op::kCont: return readable_rows(a) && float_rows(&node);
    case Op::kCopy: return float_rows(a) && readable_rows(&node);
    default: return false;
  }
}

void run_rows(const Tensor& node, cudaStream_t stream) {
  const Tensor& a = *node.src[0];
  cudaError_t e = cudaSuccess;
  switch (node.op) {
    case Op::kConcat:
      e = launch_concat(a.data, shape_of(a), node.src[1]->data, shape_of(*node.src[1]), node.data, shape_of(node),
                        node.params[0].i, stream);
      break;
    case Op::kSumRows: e = launch_sum_rows(a.data, shape_of(a), node.data, shape_of(node), stream); break;
    case Op::kCont: e = launch_cont(*elem_of(a.type), a.data, shape_of(a), node.data, shape_of(node), stream); break;
    // The node aliases the destination (its data and strides are the destination's).
    case Op::kCopy: e = launch_copy(a.data, shape_of(a), *elem_of(node.type), node.data, shape_of(node), stream); break;
    default: fail("cuda: {} is not a row mover", op_name(node.op));
  }
  check(e, op_name(node.op).data());
}

}  // namespace ggl::cuda
