#include "ggml-like/cpu/repacked_weights.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>

#include "ggml-like/core/error.h"
#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/cpu/interleaved.h"

namespace ggl {
namespace {

constexpr size_t kAlign = 64;
size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

std::optional<Type> repacked_type(const OfferedWeight& w) {
  const auto type = interleaved_type(w.type, w.ne[1]);
  if (!type || !int16_gemm().supports(*type, w.ne[0])) return std::nullopt;
  if (*type == kQ6_K_R8 && w.use != WeightUse::kOutputHead) return std::nullopt;
  return type;
}

RepackedWeights::RepackedWeights(std::span<const OfferedWeight> offered, const std::function<void(size_t)>& on_copied) {
  std::vector<std::optional<Type>> types;
  for (const OfferedWeight& w : offered) {
    types.push_back(repacked_type(w));
    if (types.back()) bytes_ += aligned(w.nbytes);
  }
  if (bytes_ == 0) return;
  buffer_ = {static_cast<uint8_t*>(std::aligned_alloc(kAlign, bytes_)), std::free};
  if (!buffer_) fail("cpu backend: cannot allocate {} bytes for the interleaved weights", bytes_);
  size_t at = 0;
  for (size_t i = 0; i < offered.size(); ++i) {
    if (!types[i]) continue;
    const OfferedWeight& w = offered[i];
    uint8_t* dst = buffer_.get() + at;
    at += aligned(w.nbytes);
    const auto* src = static_cast<const uint8_t*>(w.data);
    // Groups of 8 rows, every matrix of a stack: the threads take runs of groups.
    const int64_t groups = w.ne[1] * w.ne[2] * w.ne[3] / kInterleavedRows;
    const size_t group_bytes = row_bytes(w.type, w.ne[0]) * kInterleavedRows;
    const Type type = *types[i];
#pragma omp parallel for schedule(static)
    for (int64_t g = 0; g < groups; ++g)
      interleave_rows(type, src + g * group_bytes, dst + g * group_bytes, kInterleavedRows, w.ne[0]);
    copies_.emplace(w.data, Copy{w.type, w.ne, type, dst});
    if (on_copied) on_copied(i);
  }
}

const RepackedWeights::Copy* RepackedWeights::copy_of(const Tensor& leaf) const {
  const auto it = copies_.find(leaf.data);
  if (it == copies_.end()) return nullptr;
  const Copy& c = it->second;
  if (leaf.type != c.file_type || !std::equal(c.ne.begin(), c.ne.end(), leaf.ne)) return nullptr;
  return &c;
}

ReadingCopies::ReadingCopies(Graph& graph, const RepackedWeights* weights) {
  if (!weights) return;
  std::deque<Tensor>& tensors = graph.tensors();
  std::vector<char> viewed(tensors.size(), 0);
  for (const Tensor& t : tensors)
    if (t.view_src) viewed[t.view_src->index] = 1;
  for (Tensor& t : tensors) {
    if (t.op != Op::kLeaf || viewed[t.index]) continue;
    if (const RepackedWeights::Copy* c = weights->copy_of(t)) {
      swapped_.push_back({&t, t.type, t.data});
      t.type = c->type;
      t.data = c->data;
    }
  }
}

ReadingCopies::~ReadingCopies() {
  for (const Swapped& s : swapped_) {
    s.leaf->type = s.type;
    s.leaf->data = s.data;
  }
}

}  // namespace ggl
