// The output tensors of a conversion, each with the recipe that produces its float32 rows from
// the memory-mapped Hugging Face tensors: copies, per-expert merges, the Llama rotary permutation,
// and the MLA split of kv_b into k_b / v_b. Nothing is read until a recipe runs.
#pragma once
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "convert/safetensors.h"
#include "convert/tensor_types.h"

namespace latte::convert {

struct PlannedTensor {
  std::string name;         // GGUF name, e.g. "blk.0.attn_q_a.weight"
  std::vector<int64_t> ne;  // GGUF dims, fastest-first
  RowFill fill;             // rows of ne[0] floats, in GGUF order; reads each
                            // source row once (pages dropped after reading)

  int64_t rows() const;
  int64_t n_elements() const;
};

// The checkpoint's tensors as the planners consume them: each one is checked against the shape
// the config implies and marked as used, so that leftovers can be reported.
class CheckpointTensors {
 public:
  explicit CheckpointTensors(const SafetensorsCheckpoint& ckpt) : ckpt_(ckpt) {}

  bool has(const std::string& name) const { return ckpt_.find(name) != nullptr; }
  // The tensor `name` with the given HF shape (slowest-first) and a float dtype; errors name the
  // shard and tensor: missing tensor, unsupported dtype, shape mismatch.
  const StTensor& take(const std::string& name, const std::vector<int64_t>& shape);
  // Marks a tensor as deliberately not converted.
  void skip(const std::string& name) { used_.insert(name); }
  // Throws for the first tensor that was neither taken nor skipped: an unexpected tensor means
  // the checkpoint is not what the config says it is.
  void check_all_used(const std::string& arch) const;

 private:
  const SafetensorsCheckpoint& ckpt_;
  std::set<std::string> used_;
};

// A tensor copied as is: GGUF dims are the HF shape reversed.
PlannedTensor plan_copy(std::string name, const StTensor& t);

// Per-expert 2-D weights [rows][cols] (all the same shape) stacked into one 3-D tensor
// ne = [cols, rows, n_expert], expert e at index e.
PlannedTensor plan_merge_experts(std::string name, std::vector<const StTensor*> experts);

// A Llama q/k projection [n_head * head_dim][n_embd]: Hugging Face orders each head's rows
// rotate-half style (all first halves of the rotary pairs, then all second halves); GGUF wants
// the pairs adjacent. Output row h*hd + 2j + k comes from input row h*hd + k*(hd/2) + j.
PlannedTensor plan_rope_permuted(std::string name, const StTensor& t, int64_t n_head);

// DeepSeek's kv_b_proj [n_head * (nope + v)][kv_lora] split for the current MLA layout:
// k_b is [n_head][kv_lora][nope] (each head's nope block transposed), v_b is [n_head][v][kv_lora].
PlannedTensor plan_kv_b_to_k_b(std::string name, const StTensor& kv_b, int64_t n_head, int64_t nope, int64_t v);
PlannedTensor plan_kv_b_to_v_b(std::string name, const StTensor& kv_b, int64_t n_head, int64_t nope, int64_t v);

}  // namespace latte::convert
