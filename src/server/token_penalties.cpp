#include "src/server/token_penalties.h"

namespace latte::server {

void TokenPenalties::apply(std::span<float> logits) const {
  if (!active()) return;
  for (const auto& [token, count] : counts_) {
    if (token < 0 || static_cast<size_t>(token) >= logits.size()) continue;
    logits[static_cast<size_t>(token)] -= frequency_ * static_cast<float>(count) + presence_;
  }
}

void TokenPenalties::accept(int32_t token) {
  if (active()) ++counts_[token];
}

}  // namespace latte::server
