// Where each tensor of a model lives when a GPU helps: decided once at load from the flags, in
// plain C++ (no device needed: `latte info MODEL --plan` prints the same table).
//
//   -ngl N         the last N layers on the GPU; N > n_layer: the output head too (llama.cpp's
//                  meaning, -ngl 99 = everything but the token embedding)
//   --cpu-moe      routed experts of every layer stay on the CPU
//   --n-cpu-moe N  routed experts of the first N layers stay on the CPU
//   --gpu-budget   the GPU holds at most this many bytes, work buffers included: tensor groups
//                  go over in order of benefit per byte (what every token reads first):
//                    1. per layer, its attention tensors and its cache,
//                    2. per layer, its dense FFN or its shared experts and router,
//                    3. the output head,
//                    4. per layer, its routed experts;
//                  layers from the last down, a group that does not fit is skipped. Without
//                  -ngl every layer is a candidate; with it, only the last N.
//   -ot RE=DEV     tensors whose name matches RE go to DEV (cuda or cpu), applied last, the
//                  first matching rule winning (as llama.cpp); caches are named cache.<layer>.
#pragma once
#include <cstddef>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "src/model/hparams.h"
#include "src/placement/tensor_roles.h"

namespace latte {

enum class Device { kCpu, kGpu };

struct TensorOverride {
  std::string pattern;
  std::regex regex;
  Device device = Device::kCpu;
};

struct PlacementRequest {
  std::optional<int> gpu_layers;  // -ngl
  bool cpu_moe = false;
  int n_cpu_moe = 0;
  std::optional<size_t> budget;  // bytes (an `auto` budget already resolved)
  std::vector<TensorOverride> overrides;
};

struct PlacedTensor {
  PlanTensor tensor;
  Device device = Device::kCpu;
};

struct Placement {
  std::vector<PlacedTensor> tensors;  // in the order given
  int n_layer = 0;
  size_t work_bytes = 0;  // GPU compute buffers; 0 when nothing is on the GPU
  std::optional<size_t> budget;

  // Bytes on a device, of one role or of every role (work buffers not included).
  size_t bytes(Device d) const;
  size_t bytes(Device d, TensorRole r) const;
  size_t gpu_total() const { return bytes(Device::kGpu) + work_bytes; }
  // Layers with at least one tensor of role r, and those with every such tensor on the GPU.
  int layers_with(TensorRole r) const;
  int gpu_layers_with(TensorRole r) const;
};

// work_bytes: what the GPU needs for intermediate results when anything runs there
// (gpu_work_bytes()).
Placement plan_placement(std::vector<PlanTensor> tensors, int n_layer, const PlacementRequest& request,
                         size_t work_bytes);

// An estimate of the GPU's compute buffers for batches of n_batch tokens at context n_ctx: the
// widest activations of a layer plus the logits for the batch, and for MLA the latents of the
// whole context expanded to per-head K and V (the naive form for long prefills).
size_t gpu_work_bytes(const Hparams& hp, int64_t n_batch, int64_t n_ctx);

// The one line a GPU run prints at load: GPU bytes (weights, cache, work buffers, the budget if
// any), CPU bytes, and per role how many layers have it all on the GPU (docs/offload.md shows one).
std::string placement_summary(const Placement& p, bool mla);

}  // namespace latte
