// A tensor of a compute graph: element type, shape and byte strides (fastest dimension first, as
// in ggml), and for computed tensors the op and the sources that produce it. Where the bytes live
// is decided by a backend (its planner), never by the tensor: leaves point at external memory
// (memory-mapped weights, caches, graph inputs), views alias the bytes of another tensor.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ggml-like/core/types.h"

namespace ggl {

enum class Op : uint8_t {
  kLeaf,     // no computation: external memory or a graph input
  kView,     // no computation: a reshaped / permuted / sliced window onto view_src
  kGetRows,  // rows of a table selected by ids, converted to f32
  kRmsNorm,  // x / sqrt(mean(x^2) + eps) per row
  kAdd,      // a + b, b broadcast
  kMul,      // a * b, b broadcast
  kDiv,      // a / b, b broadcast
  kScale,    // a * s
  kSumRows,  // sum over dimension 0
  kSoftmax,  // softmax over dimension 0
  kSigmoid,
  kSilu,
  kSwiglu,    // silu(a) * b
  kMulMat,    // out[n, m] = sum_k w[k, n] x[k, m]   (w rows contracted)
  kMulMatT,   // out[n, m] = sum_k w[n, k] x[k, m]   (w columns contracted: w used transposed)
  kMulMatId,  // per (slot, token) a matrix chosen by an id (mixture-of-experts weights)
  kRope,      // rotary position embedding with optional YaRN
  kTopK,      // indices of the k largest values per row (optionally group-limited)
  kConcat,
  kCont,            // contiguous f32 copy of any (strided, any element type) tensor
  kCopy,            // converts f32 into the element type of a destination (aliases the destination)
  kFlashAttn,       // causal attention with an online softmax, GQA/MQA
  kPrefetch,        // no result: the slices of a paged weight some ids will likely use (paged_weights.h)
  kExpertSend,      // no result: a mul_mat_id's rows sent to the other processes (expert_exchange.h)
  kExpertExchange,  // a mul_mat_id's rows completed with those other processes computed (expert_exchange.h)
  kTokenGather,     // this process's tokens and the other processes' (data parallelism, expert_exchange.h)
};
std::string_view op_name(Op op);

inline constexpr int kMaxSrc = 4;
inline constexpr int kMaxParams = 12;

struct Tensor {
  Type type = Type::F32;
  int64_t ne[kMaxDims] = {1, 1, 1, 1};
  size_t nb[kMaxDims] = {0, 0, 0, 0};

  Op op = Op::kLeaf;
  Tensor* src[kMaxSrc] = {};
  union Param {
    int32_t i;
    float f;
  } params[kMaxParams] = {};

  // kView and kCopy share the bytes of view_src (never itself a view) starting at view_offset.
  Tensor* view_src = nullptr;
  size_t view_offset = 0;
  // Leaves: set when created. Computed tensors and views: set by the backend before running.
  void* data = nullptr;
  bool is_output = false;  // its bytes must survive until the graph has run (read by the caller)
  int index = -1;          // creation order within its graph
  std::string name;

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  // Elements of dimension 0 are adjacent (for block types: blocks are adjacent).
  bool rows_contiguous() const { return nb[0] == traits(type).block_bytes; }
  // Packed without gaps in dimension order.
  bool is_contiguous() const;
  // Bytes from the first to one past the last element.
  size_t span_bytes() const;

  uint8_t* bytes() const { return static_cast<uint8_t*>(data); }
  // Start of row (i1, i2, i3).
  uint8_t* row(int64_t i1, int64_t i2 = 0, int64_t i3 = 0) const {
    return bytes() + i1 * nb[1] + i2 * nb[2] + i3 * nb[3];
  }
  float* f32_row(int64_t i1, int64_t i2 = 0, int64_t i3 = 0) const { return reinterpret_cast<float*>(row(i1, i2, i3)); }
  const int32_t* i32_row(int64_t i1, int64_t i2 = 0, int64_t i3 = 0) const {
    return reinterpret_cast<const int32_t*>(row(i1, i2, i3));
  }
  bool is_computed() const { return op != Op::kLeaf && op != Op::kView && op != Op::kCopy; }
};

// Byte strides of a packed tensor of type t with shape ne.
void packed_strides(Type t, const int64_t ne[kMaxDims], size_t nb[kMaxDims]);
// "[a, b, c]" for messages.
std::string shape_string(const Tensor& t);

}  // namespace ggl
