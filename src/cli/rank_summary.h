// The line an expert-parallel run prints on rank 0 (mpirun, docs/scale-out.md): the rank's share
// of the experts and what the exchange between the ranks cost.
#pragma once
#include <cstdint>
#include <string>

#include "src/model/model.h"
#include "src/parallel/job.h"

namespace latte::cli {

// "expert parallelism: rank 0 of 2 holds experts 0-31 of 64 (3.77 GiB in memory, read at load);
// exchange: X MB per token sent and received, Y ms per step (Z ms of it waiting for the rows) over
// S steps (P% of W s)": what `exchange` (stats since an earlier point) did over `tokens` tokens in
// `seconds`. Empty when the model is not shared.
std::string rank_summary(const Model& model, const ExchangeStats& exchange, int64_t tokens, double seconds);

}  // namespace latte::cli
