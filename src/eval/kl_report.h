// The text llama-perplexity prints for a KL divergence run: a table row per chunk (PPL of the
// model, ln of its ratio to the base's, mean KL divergence, RMS of the token probability change,
// top-token agreement, each with its uncertainty) and the closing statistics (PPL comparison, KL
// divergence percentiles, token probability changes). Same formulas and layout.
#pragma once
#include <cstdint>
#include <string>

#include "src/eval/perplexity.h"

namespace latte::eval {

std::string kl_table_header();
std::string kl_table_row(int64_t chunk, const KlSums& sums);
// The closing statistics; kld and p_diff are sorted here. Fewer than 100 scored tokens: a line
// saying there are too few (llama-perplexity prints nothing then).
std::string kl_summary(KlResult& r);

}  // namespace latte::eval
