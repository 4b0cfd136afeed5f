// The sampling flags shared by `latte run` and `latte chat`:
//   --temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n -s/--seed
#pragma once
#include <CLI/CLI.hpp>

#include "src/sampling/sampling_params.h"

namespace latte {

// Adds the flags to `app`, writing into `params` (whose current values are shown as defaults).
// Call params.validate() (or construct a Sampler) after parsing.
void add_sampling_flags(CLI::App& app, SamplingParams& params);
// Under mpirun, every rank samples the same tokens from the same logits only with the same seed:
// a seed of -1 becomes one drawn on rank 0. Alone: unchanged.
void share_seed_across_ranks(SamplingParams& params);

}  // namespace latte
