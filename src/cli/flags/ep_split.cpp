#include "src/cli/flags/ep_split.h"

#include <fmt/format.h>

#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/gguf/gguf.h"
#include "src/eval/imatrix_sums.h"
#include "src/model/hparams.h"

namespace latte::cli {

namespace {

// The tokens routed to each expert of `layer`, from the entry of its gate, up or down experts.
std::vector<double> routing_counts(const eval::ImatrixSums& sums, int64_t layer, int64_t n_expert) {
  for (const char* part : {"gate", "up", "down"}) {
    const auto it = sums.entries.find(fmt::format("blk.{}.ffn_{}_exps.weight", layer, part));
    if (it == sums.entries.end()) continue;
    const eval::ImatrixEntry& e = it->second;
    if (e.n_matrix() != n_expert) continue;
    // One count per expert, or one per value (equal within an expert's matrix).
    const auto per = static_cast<int64_t>(e.counts.size()) / n_expert;
    if (per < 1 || static_cast<int64_t>(e.counts.size()) != per * n_expert) continue;
    std::vector<double> counts(static_cast<size_t>(n_expert));
    for (int64_t x = 0; x < n_expert; ++x) counts[static_cast<size_t>(x)] = static_cast<double>(e.counts[x * per]);
    return counts;
  }
  return {};
}

}  // namespace

ExpertSplit expert_split(const std::string& value, const std::string& model_path, int ranks) {
  if (value == "contiguous") return {};
  const Hparams hp = read_hparams(ggl::GgufFile(model_path));
  eval::ImatrixSums sums;
  try {
    sums = eval::ImatrixSums::load(value);
  } catch (const ggl::Error& e) {
    ggl::fail("--ep-split '{}': not 'contiguous' nor an importance matrix that can be read: {}", value, e.what());
  }
  std::vector<std::vector<double>> counts(static_cast<size_t>(hp.n_layer));
  for (int64_t l = hp.moe.n_leading_dense; l < hp.n_layer && hp.moe.n_expert > 0; ++l) {
    counts[static_cast<size_t>(l)] = routing_counts(sums, l, hp.moe.n_expert);
    if (counts[static_cast<size_t>(l)].empty())
      ggl::fail(
          "--ep-split '{}': no per-expert counts for layer {} ({} experts) of this model: give an importance "
          "matrix of it in GGUF (latte imatrix, llama-imatrix)",
          value, l, hp.moe.n_expert);
  }
  return ExpertSplit::balanced(counts, ranks);
}

}  // namespace latte::cli
