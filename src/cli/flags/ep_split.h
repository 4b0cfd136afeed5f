// --ep-split contiguous|FILE (docs/scale-out.md): how the ranks of an MPI job split each MoE layer's
// routed experts. contiguous: rank r of N takes experts [r E / N, (r + 1) E / N). FILE: an
// importance matrix of the model (latte imatrix or llama-imatrix, GGUF), whose per-expert counts
// are the tokens routed to each expert on its text: every rank takes as many experts as before,
// their counts summed as evenly as that allows (ExpertSplit::balanced).
#pragma once
#include <string>

#include "src/model/expert_share.h"

namespace latte::cli {

// Throws ggl::Error naming the flag for a file that cannot be read or holds no counts for one of
// the model's MoE layers.
ExpertSplit expert_split(const std::string& value, const std::string& model_path, int ranks);

}  // namespace latte::cli
