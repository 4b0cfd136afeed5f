// The model's matrices rewritten at load into the layout the CPU's decode kernels read fastest
// (ggml-like/cpu/interleaved.h: Q4_0 / Q8_0 / Q6_K as Q4_0_R8 / Q8_0_R8 / Q6_K_R8, 8 rows
// interleaved; Q6_K only as the output head), where the kernel set in use has those kernels. llama.cpp does the same ("repack"; --no-repack turns it off there and
// here). Only matrices that are nothing but the weights of matrix products are rewritten:
// attention and feed-forward projections, experts, the output matrix when it is not the token
// embeddings; not the token embeddings (rows are looked up), nor MLA's k_b / v_b / kv_b (also
// read transposed). The file's pages of a rewritten tensor are released (they stay in the page
// cache), so the process holds one copy of each weight.
#pragma once
#include <cstddef>
#include <deque>
#include <memory>

#include "ggml-like/gguf/gguf.h"
#include "src/model/weights.h"

namespace latte {

class InterleavedWeights {
 public:
  // The table `file_weights` with every matrix the CPU takes interleaved pointing to its rewritten
  // copy (none, where the kernel set in use has no interleaved kernels).
  InterleavedWeights(const ggl::GgufFile& file, const ModelWeights& file_weights);
  const ModelWeights& weights() const { return weights_; }
  size_t bytes() const { return bytes_; }
  size_t tensors() const { return infos_.size(); }

 private:
  std::deque<ggl::TensorInfo> infos_;  // the rewritten tensors' entries, at stable addresses
  ModelWeights weights_;
  std::unique_ptr<uint8_t, void (*)(void*)> buffer_{nullptr, nullptr};
  size_t bytes_ = 0;
};

}  // namespace latte
