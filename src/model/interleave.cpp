#include "src/model/interleave.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/cpu/interleaved.h"

namespace latte {
namespace {

constexpr size_t kAlign = 64;
size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// The slots whose tensors are only ever the weights of matrix products (interleave.h).
std::vector<WeightRef*> product_slots(ModelWeights& w) {
  std::vector<WeightRef*> out;
  if (w.output != w.token_embd) out.push_back(&w.output);
  for (LayerWeights& l : w.layers)
    for (WeightRef* r : {&l.wo, &l.wq, &l.wk, &l.wv, &l.wq_a, &l.wq_b, &l.wkv_a_mqa, &l.ffn_gate, &l.ffn_up,
                         &l.ffn_down, &l.ffn_gate_exps, &l.ffn_up_exps, &l.ffn_down_exps, &l.ffn_gate_shexp,
                         &l.ffn_up_shexp, &l.ffn_down_shexp})
      out.push_back(r);
  return out;
}

// The interleaved type the CPU takes for a tensor, if any: its rows (every matrix of a 3-D stack
// of experts) in whole groups, and the kernel set in use multiplying that type. Q6_K only as the
// output head: the one matrix of that type in the common files that every token reads whole; the
// others (some feed-forward and value matrices of the K-quant mixes, and their experts) would pay
// for taking the rows back to plain Q6_K in every prefill panel (interleaved.h).
std::optional<ggl::Type> cpu_layout(const ggl::TensorInfo& t, bool output_head) {
  const auto type = ggl::interleaved_type(t.type, t.ne[1]);
  if (!type || !ggl::int16_gemm().supports(*type, t.ne[0])) return std::nullopt;
  if (*type == ggl::kQ6_K_R8 && !output_head) return std::nullopt;
  return type;
}

}  // namespace

InterleavedWeights::InterleavedWeights(const ggl::GgufFile& file, const ModelWeights& file_weights)
    : weights_(file_weights) {
  // The product slots' tensors the CPU takes interleaved, less any also in a slot that is not a
  // product's weight (the tied token embeddings).
  const std::vector<WeightRef*> products = product_slots(weights_);
  std::map<WeightRef, ggl::Type> layouts;
  std::set<WeightRef> kept;
  for_each_weight(weights_, [&](WeightRef& r) {
    if (!r) return;
    if (std::find(products.begin(), products.end(), &r) == products.end())
      kept.insert(r);
    else if (const auto type = cpu_layout(*r, &r == &weights_.output))
      layouts.emplace(r, *type);
  });
  for (WeightRef t : kept) layouts.erase(t);
  std::map<WeightRef, ggl::TensorInfo*> moved;
  for (const auto& [t, type] : layouts) moved.emplace(t, nullptr);
  if (moved.empty()) return;
  for (const auto& [from, to] : moved) bytes_ += aligned(from->nbytes);
  buffer_ = {static_cast<uint8_t*>(std::aligned_alloc(kAlign, bytes_)), std::free};
  if (!buffer_) ggl::fail("{}: cannot allocate {} bytes for the interleaved weights", file.path(), bytes_);
  size_t at = 0;
  for (auto& [from, to] : moved) {
    uint8_t* dst = buffer_.get() + at;
    at += aligned(from->nbytes);
    ggl::TensorInfo& copy = infos_.emplace_back(*from);
    copy.type = layouts.at(from);
    copy.data = dst;
    to = &copy;
    // Groups of 8 rows, every matrix of a stack: the threads take runs of groups.
    const int64_t groups = from->ne[1] * from->ne[2] * from->ne[3] / ggl::kInterleavedRows;
    const size_t group_bytes = ggl::row_bytes(from->type, from->ne[0]) * ggl::kInterleavedRows;
#pragma omp parallel for schedule(static)
    for (int64_t g = 0; g < groups; ++g)
      ggl::interleave_rows(copy.type, from->data + g * group_bytes, dst + g * group_bytes, ggl::kInterleavedRows,
                           from->ne[0]);
    file.release(*from);
  }
  for_each_weight(weights_, [&](WeightRef& w) {
    if (const auto it = moved.find(w); w && it != moved.end()) w = it->second;
  });
}

}  // namespace latte
