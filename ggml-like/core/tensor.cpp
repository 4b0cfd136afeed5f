// Tensor helpers: op names, packed strides, shape strings.
#include <fmt/format.h>

#include "ggml-like/core/tensor.h"

namespace ggl {

std::string_view op_name(Op op) {
  switch (op) {
    case Op::kLeaf: return "leaf";
    case Op::kView: return "view";
    case Op::kGetRows: return "get_rows";
    case Op::kRmsNorm: return "rms_norm";
    case Op::kAdd: return "add";
    case Op::kMul: return "mul";
    case Op::kDiv: return "div";
    case Op::kScale: return "scale";
    case Op::kSumRows: return "sum_rows";
    case Op::kSoftmax: return "softmax";
    case Op::kSigmoid: return "sigmoid";
    case Op::kSilu: return "silu";
    case Op::kSwiglu: return "swiglu";
    case Op::kMulMat: return "mul_mat";
    case Op::kMulMatT: return "mul_mat_t";
    case Op::kMulMatId: return "mul_mat_id";
    case Op::kRope: return "rope";
    case Op::kTopK: return "top_k";
    case Op::kConcat: return "concat";
    case Op::kCont: return "cont";
    case Op::kCopy: return "copy";
    case Op::kFlashAttn: return "flash_attn";
    case Op::kPrefetch: return "prefetch";
    case Op::kExpertSend: return "expert_send";
    case Op::kExpertExchange: return "expert_exchange";
    case Op::kTokenGather: return "token_gather";
  }
  return "?";
}

void packed_strides(Type t, const int64_t ne[kMaxDims], size_t nb[kMaxDims]) {
  nb[0] = traits(t).block_bytes;
  nb[1] = row_bytes(t, ne[0]);
  for (int d = 2; d < kMaxDims; ++d) nb[d] = nb[d - 1] * static_cast<size_t>(ne[d - 1]);
}

bool Tensor::is_contiguous() const {
  size_t expect[kMaxDims];
  packed_strides(type, ne, expect);
  for (int d = 0; d < kMaxDims; ++d)
    if (ne[d] > 1 && nb[d] != expect[d]) return false;
  return true;
}

size_t Tensor::span_bytes() const {
  if (n_elements() == 0) return 0;
  size_t last = row_bytes(type, ne[0]);
  for (int d = 1; d < kMaxDims; ++d) last += static_cast<size_t>(ne[d] - 1) * nb[d];
  return last;
}

std::string shape_string(const Tensor& t) {
  int n = kMaxDims;
  while (n > 1 && t.ne[n - 1] == 1) --n;
  return fmt::format("[{}]", fmt::join(t.ne, t.ne + n, ", "));
}

}  // namespace ggl
