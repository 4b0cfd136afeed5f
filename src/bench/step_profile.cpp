#include "src/bench/step_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <vector>

#include "ggml-like/quant/quant.h"

namespace latte::bench {
namespace {

bool is_product(ggl::Op op) { return op == ggl::Op::kMulMat || op == ggl::Op::kMulMatT || op == ggl::Op::kMulMatId; }

// The tensor whose bytes a product reads: a view's source (MLA's halves of attn_kv_b).
const ggl::Tensor& weight_of(const ggl::Tensor& node) {
  const ggl::Tensor* w = node.src[0];
  return w->view_src ? *w->view_src : *w;
}

std::string weight_role(const std::string& name) {
  static const std::regex layer_prefix(R"(^blk\.\d+\.)"), weight_suffix(R"(\.weight$)");
  return std::regex_replace(std::regex_replace(name, layer_prefix, ""), weight_suffix, "");
}

}  // namespace

int64_t step_tokens(const ggl::Graph& graph) {
  for (const ggl::Tensor* n : graph.nodes())
    if (n->op == ggl::Op::kMulMat) return n->src[1]->ne[1];
  return 0;
}

std::string work_kind(const ggl::Tensor& node) {
  if (!is_product(node.op)) return std::string(ggl::op_name(node.op));
  const ggl::Tensor& w = weight_of(node);
  return fmt::format("{} {} {}", ggl::op_name(node.op), w.name.empty() ? "(unnamed)" : weight_role(w.name),
                     ggl::type_name(w.type));
}

double weight_bytes_read(const ggl::Tensor& node) {
  if (!is_product(node.op)) return 0;
  const ggl::Tensor& w = *node.src[0];
  // Its rows, not its span: a strided view (MLA's halves of attn_kv_b) spans the rows between.
  const double rows_bytes = static_cast<double>(ggl::row_bytes(w.type, w.ne[0]));
  if (node.op != ggl::Op::kMulMatId) return rows_bytes * static_cast<double>(w.n_rows());
  const ggl::Tensor& ids = *node.src[2];
  const int64_t experts = std::min(w.ne[2], ids.ne[0] * ids.ne[1]);  // distinct experts at most
  return rows_bytes * static_cast<double>(w.ne[1] * experts);
}

void StepProfile::add(const ggl::Graph& graph, const ggl::CpuProfile& profile) {
  const auto& nodes = graph.nodes();
  if (profile.threads <= 0 || profile.run.size() != nodes.size() * profile.threads) return;
  ++steps_;
  Kind* previous = nullptr;  // the kind the team was finishing when it met at a barrier
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ggl::Tensor& n = *nodes[i];
    if (n.op == ggl::Op::kLeaf || n.op == ggl::Op::kView) continue;  // nothing ran (a kCopy did)
    double run = 0, wait = 0;
    for (int t = 0; t < profile.threads; ++t) {
      run += profile.run_of(i, t);
      wait += profile.wait_before(i, t);
    }
    if (previous) previous->wait += wait / profile.threads;
    Kind& k = kinds_[work_kind(n)];
    k.calls += 1;
    k.run += run / profile.threads;
    k.bytes += weight_bytes_read(n);
    previous = &k;
  }
}

std::string StepProfile::table(const std::string& title) const {
  if (steps_ == 0) return {};
  std::vector<std::pair<std::string, Kind>> rows(kinds_.begin(), kinds_.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.run + a.second.wait > b.second.run + b.second.wait; });
  double total = 0, run = 0, wait = 0, bytes = 0;
  for (const auto& [name, k] : rows) {
    run += k.run;
    wait += k.wait;
    bytes += k.bytes;
  }
  total = run + wait;
  const double per = 1e3 / static_cast<double>(steps_);  // seconds in all steps -> ms per step
  auto rate = [](double b, double s) { return b > 0 && s > 0 ? fmt::format("{:.1f}", b / s / 1e9) : std::string(); };
  std::string out = fmt::format("\n{}: {} steps, {:.2f} ms each in the graph's nodes\n\n", title, steps_, total * per);
  out += "| work | calls/step | ms/step | % | waits after, ms/step | weight GB/s |\n";
  out += "|---|--:|--:|--:|--:|--:|\n";
  for (const auto& [name, k] : rows)
    out += fmt::format("| {} | {:.0f} | {:.3f} | {:.1f} | {:.3f} | {} |\n", name,
                       static_cast<double>(k.calls) / static_cast<double>(steps_), k.run * per,
                       100.0 * (k.run + k.wait) / total, k.wait * per, rate(k.bytes, k.run));
  out += fmt::format("| all | | {:.3f} | 100 | {:.3f} | {} |\n", run * per, wait * per, rate(bytes, run + wait));
  return out;
}

}  // namespace latte::bench
