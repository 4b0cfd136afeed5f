#include "src/placement/plan_table.h"

#include <fmt/format.h>

#include <functional>

#include "src/placement/byte_size.h"

namespace latte {
namespace {

// "gpu  12.00 MiB", "cpu ...", "mixed ..." for the tensors satisfying `in`; "-" for none.
std::string cell(const Placement& p, const std::function<bool(const PlanTensor&)>& in) {
  size_t gpu = 0, cpu = 0;
  for (const PlacedTensor& t : p.tensors)
    if (in(t.tensor)) (t.device == Device::kGpu ? gpu : cpu) += t.tensor.bytes;
  if (gpu + cpu == 0) return "-";
  const char* where = cpu == 0 ? "gpu" : gpu == 0 ? "cpu" : "mixed";
  return fmt::format("{:<5} {:>10}", where, format_bytes(static_cast<double>(gpu + cpu)));
}

bool ffn_role(TensorRole r) {
  return r == TensorRole::kDenseFfn || r == TensorRole::kSharedExpert || r == TensorRole::kRouter;
}

}  // namespace

std::string plan_table(const Placement& p, bool mla) {
  const auto b = [](size_t n) { return format_bytes(static_cast<double>(n)); };
  std::string out = fmt::format("{:>5}  {:<18}  {:<18}  {:<18}  {}\n", "layer", "attention",
                                mla ? "latent cache" : "kv cache", "ffn + router", "routed experts");
  for (int l = 0; l < p.n_layer; ++l) {
    const auto role_in_layer = [l](TensorRole r) {
      return [l, r](const PlanTensor& t) { return t.layer == l && t.role == r; };
    };
    out += fmt::format("{:>5}  {:<18}  {:<18}  {:<18}  {}\n", l, cell(p, role_in_layer(TensorRole::kAttention)),
                       cell(p, role_in_layer(TensorRole::kCache)),
                       cell(p, [l](const PlanTensor& t) { return t.layer == l && ffn_role(t.role); }),
                       cell(p, role_in_layer(TensorRole::kRoutedExperts)));
  }
  for (TensorRole r : {TensorRole::kEmbedding, TensorRole::kOutputHead, TensorRole::kOther})
    if (const std::string c = cell(p, [r](const PlanTensor& t) { return t.role == r && t.layer < 0; }); c != "-")
      out += fmt::format("{:<15}  {}\n", tensor_role_name(r), c);
  const size_t gpu_cache = p.bytes(Device::kGpu, TensorRole::kCache),
               cpu_cache = p.bytes(Device::kCpu, TensorRole::kCache);
  out += fmt::format("gpu: {} weights + {} cache + {} work buffers = {}", b(p.bytes(Device::kGpu) - gpu_cache),
                     b(gpu_cache), b(p.work_bytes), b(p.gpu_total()));
  if (p.budget) {
    out += fmt::format(" of a {} budget", b(*p.budget));
    if (p.gpu_total() > *p.budget) out += fmt::format(" (over it by {}: see -ot)", b(p.gpu_total() - *p.budget));
  }
  out += fmt::format("\ncpu: {} weights + {} cache = {}\n", b(p.bytes(Device::kCpu) - cpu_cache), b(cpu_cache),
                     b(p.bytes(Device::kCpu)));
  out += placement_summary(p, mla) + "\n";
  return out;
}

}  // namespace latte
