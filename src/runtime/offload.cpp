#include "src/runtime/offload.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/graph/graph.h"
#include "src/runtime/cache_shift.h"
#include "src/model/forward.h"
#include "src/model/kv_cache.h"

namespace latte {
namespace {

constexpr size_t kAlign = 256;
size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// The placement entry a graph leaf belongs to: a file tensor by its name, a cache stream
// ("cache.<layer>.<stream>") by its layer's pseudo-tensor; -1 for anything else.
int entry_of(const ggl::Tensor& leaf, const std::map<std::string, int>& index) {
  std::string name = leaf.name;
  if (name.rfind("cache.", 0) == 0) name = name.substr(0, name.rfind('.'));
  const auto it = index.find(name);
  return it == index.end() ? -1 : it->second;
}

// Graphs with the shapes a session runs: a decode step after one cached token, two-token and
// whole-batch prompts in each MLA form (a kernel may take some sizes and not others), and a cache
// shift; on a host cache of one batch (only the nodes matter).
std::vector<std::unique_ptr<ggl::Graph>> probe_graphs(const Model& model, const KvCache& cache, int64_t n_batch) {
  std::vector<std::unique_ptr<ggl::Graph>> out;
  const std::vector<int32_t> tokens(static_cast<size_t>(std::max<int64_t>(2, n_batch)), 0);
  const auto forward = [&](int64_t n, int64_t n_past, MlaMode path) {
    auto g = std::make_unique<ggl::Graph>();
    ForwardBatch batch;
    batch.tokens = std::span<const int32_t>(tokens.data(), static_cast<size_t>(n));
    batch.n_past = n_past;
    batch.mla_path = path;
    build_forward(*g, model, cache, batch);
    out.push_back(std::move(g));
  };
  forward(1, 1, MlaMode::kAbsorb);
  for (const int64_t n : n_batch > 2 ? std::vector<int64_t>{2, n_batch} : std::vector<int64_t>{2}) {
    forward(n, 0, MlaMode::kAbsorb);
    if (model.hparams().is_mla()) forward(n, 0, MlaMode::kNaive);
  }
  auto shift = std::make_unique<ggl::Graph>();
  build_cache_rotation(*shift, cache, model.hparams(), model.weights(), 0, 1, -1);
  out.push_back(std::move(shift));
  return out;
}

}  // namespace

// The device takes the file's types and bytes; the entries left in the file's mapping are the
// CPU's, which reads its own copies of those it rewrote at load (Model::prepared_weights).
DeviceWeights::DeviceWeights(const Model& model, ggl::Backend& device, const std::set<std::string>& names)
    : weights_(model.weights()) {
  std::map<WeightRef, const ggl::TensorInfo*> moved;
  size_t total = 0;
  for_each_weight(weights_, [&](WeightRef& w) {
    if (w && names.count(w->name) && !moved.count(w)) {
      moved[w] = nullptr;
      total += aligned(w->nbytes);
    }
  });
  if (moved.empty()) return;
  buffer_ = device.allocate(total);
  size_t at = 0;
  for (auto& [from, to] : moved) {
    ggl::TensorInfo& copy = infos_.emplace_back(*from);
    copy.data = buffer_->base() + at;
    device.upload(buffer_->base() + at, from->data, from->nbytes);
    at += aligned(from->nbytes);
    to = &copy;
  }
  device.synchronize();
  for_each_weight(weights_, [&](WeightRef& w) {
    if (const auto it = moved.find(w); w && it != moved.end()) w = it->second;
  });
}

OffloadPlan plan_offload(const Model& model, const PlacementRequest& request, int64_t n_ctx, ggl::Type cache_type,
                         int64_t n_batch, const ggl::Backend& device) {
  const Hparams& hp = model.hparams();
  const size_t cache_per_layer =
      cache_bytes_per_token(hp, cache_type) / static_cast<size_t>(hp.n_layer) * static_cast<size_t>(n_ctx);
  OffloadPlan out;
  out.placement = plan_placement(classify_tensors(model.file().tensors(), hp.n_layer, cache_per_layer),
                                 static_cast<int>(hp.n_layer), request, gpu_work_bytes(hp, n_batch, n_ctx));
  std::vector<PlacedTensor>& placed = out.placement.tensors;
  std::map<std::string, int> index;
  for (size_t i = 0; i < placed.size(); ++i) index[placed[i].tensor.name] = static_cast<int>(i);

  const KvCache probe_cache(hp, std::max<int64_t>(4, n_batch), cache_type);
  const auto graphs = probe_graphs(model, probe_cache, n_batch);
  // Moving a tensor back can leave another node reading the GPU and the CPU: repeat until stable.
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& g : graphs)
      for (const ggl::Tensor* node : g->nodes()) {
        std::vector<int> gpu;
        bool cpu = false;
        for (const ggl::Tensor* s : node->src) {
          if (!s) continue;
          const ggl::Tensor* base = s->view_src ? s->view_src : s;
          if (base->op != ggl::Op::kLeaf || g->is_input(*base)) continue;
          const int e = entry_of(*base, index);
          if (e >= 0 && placed[e].device == Device::kGpu)
            gpu.push_back(e);
          else
            cpu = true;
        }
        if (gpu.empty() || (!cpu && device.supports_op(*node))) continue;
        for (int e : gpu) {
          placed[e].device = Device::kCpu;
          out.kept_on_cpu.push_back(placed[e].tensor.name);
        }
        changed = true;
      }
  }
  if (out.placement.bytes(Device::kGpu) == 0) out.placement.work_bytes = 0;
  return out;
}

std::set<std::string> gpu_tensor_names(const Placement& p) {
  std::set<std::string> names;
  for (const PlacedTensor& t : p.tensors)
    if (t.device == Device::kGpu && t.tensor.role != TensorRole::kCache) names.insert(t.tensor.name);
  return names;
}

std::vector<ggl::Backend*> cache_devices(const Placement& p, int64_t n_layer, ggl::Backend& device) {
  std::vector<ggl::Backend*> out(static_cast<size_t>(n_layer), nullptr);
  for (const PlacedTensor& t : p.tensors)
    if (t.tensor.role == TensorRole::kCache && t.device == Device::kGpu && t.tensor.layer >= 0 &&
        t.tensor.layer < n_layer)
      out[t.tensor.layer] = &device;
  return out;
}

}  // namespace latte
