#include "src/server/prompt_cache.h"

#include <algorithm>

namespace latte::server {

int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return static_cast<int64_t>(i);
}

PromptCachePlan plan_prompt_cache(std::span<const SlotCacheView> slots, std::span<const int32_t> prompt,
                                  bool use_cache) {
  PromptCachePlan plan;
  // At most all but the last token: its logits are what the first reply token is sampled from.
  const std::span<const int32_t> reusable = prompt.first(prompt.empty() ? 0 : prompt.size() - 1);
  int64_t best = -1;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!slots[i].free) continue;
    const int64_t n = use_cache ? common_prefix(slots[i].cached, reusable) : 0;
    const bool older = plan.slot < 0 || slots[i].last_used < slots[static_cast<size_t>(plan.slot)].last_used;
    if (n > best || (n == best && older)) {
      best = n;
      plan.slot = static_cast<int>(i);
    }
  }
  if (plan.slot < 0 || !use_cache) return plan;
  plan.reused = best;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (static_cast<int>(i) == plan.slot) continue;
    const int64_t n = common_prefix(slots[i].cached, reusable);
    if (n > plan.reused) {
      plan.reused = n;
      plan.copy_from = static_cast<int>(i);
    }
  }
  return plan;
}

}  // namespace latte::server
