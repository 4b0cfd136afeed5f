#include "src/placement/placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "src/placement/byte_size.h"

namespace latte {
namespace {

bool is_ffn_group(TensorRole r) {
  return r == TensorRole::kDenseFfn || r == TensorRole::kSharedExpert || r == TensorRole::kRouter;
}

// Whether -ngl / --cpu-moe / --n-cpu-moe let a tensor onto the GPU at all.
bool candidate(const PlanTensor& t, int n_layer, const PlacementRequest& r) {
  const int ngl = r.gpu_layers.value_or(r.budget ? n_layer + 1 : 0);
  switch (t.role) {
    case TensorRole::kEmbedding:
    case TensorRole::kOther: return false;
    case TensorRole::kOutputHead: return ngl > n_layer;
    case TensorRole::kRoutedExperts:
      if (r.cpu_moe || t.layer < r.n_cpu_moe) return false;
      [[fallthrough]];
    default: return t.layer >= 0 && t.layer >= n_layer - ngl;
  }
}

}  // namespace

size_t Placement::bytes(Device d) const {
  size_t n = 0;
  for (const PlacedTensor& t : tensors)
    if (t.device == d) n += t.tensor.bytes;
  return n;
}

size_t Placement::bytes(Device d, TensorRole r) const {
  size_t n = 0;
  for (const PlacedTensor& t : tensors)
    if (t.device == d && t.tensor.role == r) n += t.tensor.bytes;
  return n;
}

int Placement::layers_with(TensorRole r) const {
  std::vector<char> seen(static_cast<size_t>(n_layer), 0);
  for (const PlacedTensor& t : tensors)
    if (t.tensor.role == r && t.tensor.layer >= 0) seen[t.tensor.layer] = 1;
  return static_cast<int>(std::count(seen.begin(), seen.end(), 1));
}

int Placement::gpu_layers_with(TensorRole r) const {
  std::vector<int> state(static_cast<size_t>(n_layer), 0);  // 0 none, 1 all on the GPU, 2 some on the CPU
  for (const PlacedTensor& t : tensors)
    if (t.tensor.role == r && t.tensor.layer >= 0)
      state[t.tensor.layer] = t.device == Device::kGpu && state[t.tensor.layer] != 2 ? 1 : 2;
  return static_cast<int>(std::count(state.begin(), state.end(), 1));
}

Placement plan_placement(std::vector<PlanTensor> tensors, int n_layer, const PlacementRequest& request,
                         size_t work_bytes) {
  Placement p;
  p.n_layer = n_layer;
  p.budget = request.budget;
  for (PlanTensor& t : tensors) p.tensors.push_back({std::move(t), Device::kCpu});

  // A group: the candidate tensors satisfying `in`, moved together or not at all.
  size_t room = request.budget ? (*request.budget > work_bytes ? *request.budget - work_bytes : 0) : SIZE_MAX;
  const auto place = [&](const std::function<bool(const PlanTensor&)>& in) {
    size_t need = 0;
    for (const PlacedTensor& t : p.tensors)
      if (t.device == Device::kCpu && in(t.tensor) && candidate(t.tensor, n_layer, request)) need += t.tensor.bytes;
    if (need == 0 || need > room) return;
    room -= need;
    for (PlacedTensor& t : p.tensors)
      if (t.device == Device::kCpu && in(t.tensor) && candidate(t.tensor, n_layer, request)) t.device = Device::kGpu;
  };
  for (int l = n_layer - 1; l >= 0; --l)
    place([l](const PlanTensor& t) {
      return t.layer == l && (t.role == TensorRole::kAttention || t.role == TensorRole::kCache);
    });
  for (int l = n_layer - 1; l >= 0; --l)
    place([l](const PlanTensor& t) { return t.layer == l && is_ffn_group(t.role); });
  place([](const PlanTensor& t) { return t.role == TensorRole::kOutputHead; });
  for (int l = n_layer - 1; l >= 0; --l)
    place([l](const PlanTensor& t) { return t.layer == l && t.role == TensorRole::kRoutedExperts; });

  for (PlacedTensor& t : p.tensors)
    for (const TensorOverride& o : request.overrides)
      if (std::regex_search(t.tensor.name, o.regex)) {
        t.device = o.device;
        break;
      }
  p.work_bytes = p.bytes(Device::kGpu) > 0 ? work_bytes : 0;
  return p;
}

size_t gpu_work_bytes(const Hparams& hp, int64_t n_batch, int64_t n_ctx) {
  const MoeConfig& moe = hp.moe;
  const int64_t ffn = std::max(hp.n_ff, moe.n_ff_exp * (moe.n_expert_used + moe.n_expert_shared));
  const int64_t heads = hp.n_head * (hp.head_dim_k + hp.head_dim_v);
  // Per token: the residual, the normed input and two more hidden-size results, the FFN's gate,
  // up and product, the per-head queries and outputs, the logits.
  const int64_t per_token = 4 * hp.n_embd + 3 * ffn + heads + hp.n_vocab;
  int64_t floats = per_token * n_batch;
  if (hp.is_mla()) floats += n_ctx * hp.n_head * (hp.mla.qk_nope + hp.mla.v_head_dim);
  return static_cast<size_t>(floats) * sizeof(float);
}

std::string placement_summary(const Placement& p, bool mla) {
  const auto b = [](size_t n) { return format_bytes(static_cast<double>(n)); };
  const size_t cache = p.bytes(Device::kGpu, TensorRole::kCache);
  std::string line = fmt::format("offload: gpu {} ({} weights, {} {} cache, {} work buffers", b(p.gpu_total()),
                                 b(p.bytes(Device::kGpu) - cache), b(cache), mla ? "latent" : "kv", b(p.work_bytes));
  line += p.budget ? fmt::format(", budget {})", b(*p.budget)) : ")";
  line += fmt::format(", cpu {}; attention {}/{} layers", b(p.bytes(Device::kCpu)),
                      p.gpu_layers_with(TensorRole::kAttention), p.layers_with(TensorRole::kAttention));
  const int dense = p.layers_with(TensorRole::kDenseFfn), shared = p.layers_with(TensorRole::kSharedExpert);
  if (dense > 0) line += fmt::format(", dense ffn {}/{}", p.gpu_layers_with(TensorRole::kDenseFfn), dense);
  if (shared > 0) line += fmt::format(", shared experts {}/{}", p.gpu_layers_with(TensorRole::kSharedExpert), shared);
  if (const int routed = p.layers_with(TensorRole::kRoutedExperts); routed > 0)
    line += fmt::format(", routed experts {}/{}", p.gpu_layers_with(TensorRole::kRoutedExperts), routed);
  const bool head = p.bytes(Device::kGpu, TensorRole::kOutputHead) > 0;
  line += fmt::format(", output head {}", head ? "gpu" : "cpu");
  return line;
}

}  // namespace latte
