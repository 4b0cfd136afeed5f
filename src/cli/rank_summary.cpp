#include "src/cli/rank_summary.h"

#include <fmt/format.h>

#include "src/placement/byte_size.h"

namespace latte::cli {

std::string rank_summary(const Model& model, const ExchangeStats& exchange, int64_t tokens, double seconds) {
  const ExpertShare& share = model.expert_share();
  if (share.ranks <= 1) return {};
  const int64_t E = model.hparams().moe.n_expert;
  int64_t moe_layers = 0, held = 0;
  for (size_t il = 0; il < model.weights().layers.size(); ++il) {
    if (!model.weights().layers[il].is_moe()) continue;
    ++moe_layers;
    for (int64_t e = 0; e < E; ++e) held += model.own_experts(static_cast<int64_t>(il)).holds(e, E);
  }
  const ExpertPager* pager = model.expert_pager().get();
  const ggl::ExpertRange range = rank_experts(E, share.rank, share.ranks);
  const std::string which = share.split.contiguous()
                                ? fmt::format("experts {}-{} of {}", range.first, range.end - 1, E)
                                : fmt::format("{} experts of each layer's {} (--ep-split: balanced by routing counts)",
                                              moe_layers > 0 ? held / moe_layers : 0, E);
  std::string s = fmt::format("expert parallelism: rank {} of {} holds {} ({} in memory, {})", share.rank, share.ranks,
                              which, format_bytes(pager ? static_cast<double>(pager->resident_bytes()) : 0.0),
                              pager && pager->preloaded() ? "read at load" : "read as needed");
  const double steps = moe_layers > 0 ? static_cast<double>(exchange.exchanges) / static_cast<double>(moe_layers) : 0;
  if (steps > 0 && tokens > 0)
    s += fmt::format(
        "; its experts computed {:.1f}% of the routed pairs; exchange: {:.3f} MB per token sent and received, "
        "{:.2f} ms per step ({:.2f} ms of it waiting for the others) over {:.0f} steps ({:.1f}% of {:.2f} s)",
        exchange.pairs > 0 ? 100.0 * static_cast<double>(exchange.own_pairs) / static_cast<double>(exchange.pairs)
                           : 0.0,
        static_cast<double>(exchange.bytes_sent + exchange.bytes_received) / 1e6 / static_cast<double>(tokens),
        exchange.seconds * 1000 / steps, exchange.wait_seconds * 1000 / steps, steps,
        seconds > 0 ? 100 * exchange.seconds / seconds : 0.0, seconds);
  return s;
}

}  // namespace latte::cli
