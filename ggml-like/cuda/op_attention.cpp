// Flash-attention nodes to the launchers of op_attention.cu: the absorbed MLA decode kernel where
// the shapes are its (one KV head for all query heads, V the leading part of each K row, few
// tokens), the general one otherwise.
#include <algorithm>

#include "ggml-like/core/error.h"
#include "ggml-like/cuda/cuda_ops.h"
#include "ggml-like/cuda/mla_decode_block.h"

namespace ggl::cuda {
namespace {

bool kv_rows(const Tensor* t) { return readable_rows(t) && t->ne[0] <= kAttnMaxDim; }

// Absorbed MLA decode: V's rows are the first Dv values of K's rows (the same cache bytes).
bool is_mla_decode(const Tensor& node) {
  const Tensor& q = *node.src[0];
  const Tensor& k = *node.src[1];
  const Tensor& v = *node.src[2];
  const bool v_in_k = v.type == k.type && v.data == k.data && v.nb[2] == k.nb[2] && v.ne[0] <= k.ne[0];
  return v_in_k && k.ne[1] == 1 && q.ne[1] >= 2 && q.ne[2] <= mla::kMaxTokens && q.ne[0] <= mla::kMaxDk &&
         v.ne[0] <= mla::kMaxDv;
}

int multiprocessors() {
  int device = 0, count = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  return std::max(count, 1);
}

// Chunks of the cache per (token, head group): about two blocks per multiprocessor in all, none
// shorter than 64 keys.
int mla_splits(const Tensor& node) {
  const Tensor& q = *node.src[0];
  const int64_t groups = q.ne[2] * ((q.ne[1] + mla::kHeads - 1) / mla::kHeads);
  const int64_t n_kv = node.src[1]->ne[2];
  const int64_t wanted = (2 * multiprocessors() + groups - 1) / groups;
  return static_cast<int>(std::clamp<int64_t>(std::min(wanted, (n_kv + 63) / 64), 1, mla::kMaxSplits));
}

AttentionArgs attention_args(const Tensor& node) {
  const Tensor& q = *node.src[0];
  const Tensor& k = *node.src[1];
  const Tensor& v = *node.src[2];
  return {q.data,      shape_of(q),      k.data,
          shape_of(k), *elem_of(k.type), v.data,
          shape_of(v), *elem_of(v.type), static_cast<const int32_t*>(node.src[3]->data),
          node.data,   shape_of(node),   node.params[0].f};
}

}  // namespace

bool supports_attention(const Tensor& node) {
  const Tensor* q = node.src[0];
  const Tensor* pos = node.src[3];
  return node.op == Op::kFlashAttn && float_rows(q) && q->ne[0] <= kAttnMaxDim && kv_rows(node.src[1]) &&
         kv_rows(node.src[2]) && pos->type == Type::I32 && pos->rows_contiguous() && float_rows(&node);
}

size_t attention_work_bytes(const Tensor& node) {
  if (node.op != Op::kFlashAttn || !is_mla_decode(node)) return 0;
  const Tensor& q = *node.src[0];
  return mla::work_floats(q.ne[1], q.ne[2], node.src[2]->ne[0], mla_splits(node)) * sizeof(float);
}

void run_attention(const Tensor& node, cudaStream_t stream, void* work) {
  const AttentionArgs args = attention_args(node);
  if (is_mla_decode(node)) {
    if (!work) fail("cuda: flash_attn '{}': no work buffer for the MLA decode kernel", node.name);
    check(launch_mla_decode(args, static_cast<float*>(work), mla_splits(node), stream), "flash_attn (MLA decode)");
  } else {
    check(launch_flash_attn(args, stream), "flash_attn");
  }
}

}  // namespace ggl::cuda
