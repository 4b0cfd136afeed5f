// The placement table `latte info MODEL --plan` prints: one row per layer (attention, cache, FFN
// and router, routed experts: where and how large), the tensors outside layers, the totals per
// device and the summary line a GPU run prints at load.
#pragma once
#include <string>

#include "src/placement/placement.h"

namespace latte {

std::string plan_table(const Placement& p, bool mla);

}  // namespace latte
