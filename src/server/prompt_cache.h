// Which slot a new prompt goes to, and how much of it the slots' caches already hold (the server's
// prompt cache, as llama-server's cache_prompt and SGLang's prefix reuse at slot granularity). A
// slot keeps the tokens of its last conversation cached after the request ends; a new prompt takes
// the free slot whose cache shares the longest prefix with it (ties and no match: the least
// recently used, so a conversation's cache survives longest), keeps that prefix and evaluates only
// the rest. When another slot, busy or not, holds a longer prefix, its rows are copied instead:
// that makes a system prompt shared by concurrent requests cheap. The prompt's last token is
// always evaluated again, since its logits are needed to sample the first reply token.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace latte::server {

// What the planner knows of a slot.
struct SlotCacheView {
  std::span<const int32_t> cached;  // the tokens whose cache rows the slot's sequence holds, in order
  bool free = false;                // no request in it
  uint64_t last_used = 0;           // when a request last entered it (larger: more recent)
};

struct PromptCachePlan {
  int slot = -1;       // the free slot the prompt goes to; -1: none is free
  int64_t reused = 0;  // prompt tokens whose rows it will hold before evaluating the rest
  int copy_from = -1;  // >= 0: those rows are copied from this slot; -1: the slot keeps its own
};

// The length of the common prefix of a and b.
int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b);

// The plan for `prompt` (not empty). use_cache false: the least recently used free slot, nothing
// reused.
PromptCachePlan plan_prompt_cache(std::span<const SlotCacheView> slots, std::span<const int32_t> prompt,
                                  bool use_cache);

}  // namespace latte::server
