// `latte bench --profile`: where a step's time goes, by kind of work, from the CPU backend's node
// times (ggml-like/cpu/cpu_profile.h). A matrix product counts under its weight's role (the
// weight's name without "blk.N." and ".weight": attn_q, ffn_up_exps, output) and type, other
// nodes under their op. Each kind gets its kernel time per step, the barrier waits that follow it
// (the team waiting for its slowest thread to finish that work), and, for products, the weight
// bytes read per second: the figure to hold against the DRAM probe.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "ggml-like/cpu/cpu_profile.h"
#include "ggml-like/graph/graph.h"

namespace latte::bench {

class StepProfile {
 public:
  // One computed graph and its profile (the same node order).
  void add(const ggl::Graph& graph, const ggl::CpuProfile& profile);
  int64_t steps() const { return steps_; }
  // A Markdown table, slowest kind first, with a total row; `title` names the steps.
  std::string table(const std::string& title) const;

  struct Kind {
    int64_t calls = 0;
    double run = 0;    // seconds in the kernels, averaged over the team's threads
    double wait = 0;   // seconds at the barriers after this kind's nodes, averaged likewise
    double bytes = 0;  // weight bytes the products read (routed experts: at most one per (slot, token))
  };
  const std::map<std::string, Kind>& kinds() const { return kinds_; }

 private:
  std::map<std::string, Kind> kinds_;
  int64_t steps_ = 0;
};

// The tokens a step's graph computes: the activation columns of its first matrix product.
int64_t step_tokens(const ggl::Graph& graph);

// The kind a node counts as (see above): "mul_mat attn_q q4_K", "mul_mat_id ffn_up_exps iq2_xxs",
// "rms_norm".
std::string work_kind(const ggl::Tensor& node);
// The weight bytes a product node reads; 0 for other nodes.
double weight_bytes_read(const ggl::Tensor& node);

}  // namespace latte::bench
