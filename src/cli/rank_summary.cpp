#include "src/cli/rank_summary.h"

#include <fmt/format.h>

#include "src/placement/byte_size.h"

namespace latte::cli {

std::string rank_summary(const Model& model, const ExchangeStats& exchange, int64_t tokens, double seconds) {
  const ExpertShare& share = model.expert_share();
  if (share.ranks <= 1) return {};
  const ggl::ExpertRange own = model.own_experts();
  int64_t moe_layers = 0;
  for (const LayerWeights& l : model.weights().layers) moe_layers += l.is_moe();
  const ExpertPager* pager = model.expert_pager().get();
  std::string s = fmt::format("expert parallelism: rank {} of {} holds experts {}-{} of {} ({} in memory, {})",
                              share.rank, share.ranks, own.first, own.end - 1, model.hparams().moe.n_expert,
                              format_bytes(pager ? static_cast<double>(pager->resident_bytes()) : 0.0),
                              pager && pager->preloaded() ? "read at load" : "read as needed");
  const double steps = moe_layers > 0 ? static_cast<double>(exchange.exchanges) / static_cast<double>(moe_layers) : 0;
  if (steps > 0 && tokens > 0)
    s += fmt::format(
        "; exchange: {:.3f} MB per token sent and received, {:.2f} ms per step ({:.2f} ms of it waiting for "
        "the rows) over {:.0f} steps ({:.1f}% of {:.2f} s)",
        static_cast<double>(exchange.bytes_sent + exchange.bytes_received) / 1e6 / static_cast<double>(tokens),
        exchange.seconds * 1000 / steps, exchange.wait_seconds * 1000 / steps, steps,
        seconds > 0 ? 100 * exchange.seconds / seconds : 0.0, seconds);
  return s;
}

}  // namespace latte::cli
