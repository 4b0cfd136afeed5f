// Collects an importance matrix during forward passes, as llama.cpp's imatrix tool does: for
// every product of a model weight with activations, the squares of the activations entering it,
// summed per input column; for routed experts (mul_mat_id) per expert, with per-expert counts.
// Like the reference it takes only the "blk.*" weights (the output head too with
// process_output) and skips ordinary products of fewer than 16 tokens.
//
// It works through the session's graph hooks (SessionOptions::on_graph_built / on_graph_run): the
// activations and expert ids of the products it takes are kept as graph outputs and read after
// the graph ran. Products whose weight is a view or 3-D outside mul_mat_id (MLA's absorbed
// W_UK / W_UV, the wk_b / wv_b layout) are not taken: run MLA models in the naive form, where
// attn_kv_b multiplies the latents as in the reference.
#pragma once
#include <cstdint>
#include <functional>
#include <span>

#include "src/eval/imatrix_sums.h"
#include "src/eval/perplexity.h"
#include "src/runtime/session.h"

namespace latte::eval {

class ImatrixCollector {
 public:
  explicit ImatrixCollector(bool process_output) : process_output_(process_output) {}
  ImatrixCollector(const ImatrixCollector&) = delete;
  ImatrixCollector& operator=(const ImatrixCollector&) = delete;

  // Installs the hooks; the collector must outlive every session made from these options.
  void attach(SessionOptions& options);
  // The token count of the graphs that follow. A product with more columns than that (the naive
  // MLA form multiplies every cached latent) counts only its last columns, the step's own.
  void set_step_tokens(int64_t n) { step_tokens_ = n; }

  ImatrixSums& sums() { return sums_; }

 private:
  bool wanted(const ggl::Tensor& node) const;
  void mark(ggl::Graph& g) const;
  void collect(const ggl::Graph& g, ggl::Backend& backend);
  void add_mul_mat(const ggl::Tensor& node, ggl::Backend& backend);
  void add_mul_mat_id(const ggl::Tensor& node, ggl::Backend& backend);
  ImatrixEntry& entry(const std::string& name, int64_t n_cols, int64_t n_matrix);

  bool process_output_;
  int64_t step_tokens_ = 0;
  ImatrixSums sums_;
};

struct ImatrixRun {
  int64_t n_ctx = 512;
  int64_t n_chunk = 0;     // chunk_count()
  int64_t n_batch = 512;   // tokens per graph (the session's n_batch must be at least this)
  int32_t bos = -1;        // each chunk's first token; -1: none
  bool perplexity = true;  // also score the chunks' second halves (llama-imatrix without --no-ppl)
  std::function<void(int64_t chunk, const NllSums&)> on_chunk;
};

// Evaluates the chunks of tokens as llama-imatrix does (each from an empty cache, BOS first, in
// graphs of n_batch tokens) with the collector attached to the session, adding the chunks to its
// sums. Returns the perplexity sums (empty without run.perplexity).
NllSums collect_imatrix(Session& session, std::span<const int32_t> tokens, const ImatrixRun& run,
                        ImatrixCollector& collector);

}  // namespace latte::eval
