// Loading a model per a GPU placement (docs/offload.md): which tensors a session puts on a device
// backend, and the placed weights uploaded there. The session (session.h) then keeps the caches of
// the placed layers in the device's memory and runs its graphs through a Scheduler over [device,
// CPU].
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ggml-like/core/types.h"
#include "ggml-like/backend/backend.h"
#include "src/model/model.h"
#include "src/placement/placement.h"

namespace latte {

// The model's placed weights in one buffer of a device; weights() is the model's table with those
// entries pointing there (the others still into the file's mapping).
class DeviceWeights {
 public:
  DeviceWeights(const Model& model, ggl::Backend& device, const std::set<std::string>& names);
  const ModelWeights& weights() const { return weights_; }
  size_t bytes() const { return buffer_ ? buffer_->size() : 0; }

 private:
  std::deque<ggl::TensorInfo> infos_;  // the placed tensors' entries, at stable addresses
  ModelWeights weights_;
  std::unique_ptr<ggl::BackendBuffer> buffer_;
};

struct OffloadPlan {
  Placement placement;
  // Tensors the request put on the GPU that stay on the CPU, because a node reading them has no
  // kernel on the device or also reads a CPU tensor (the scheduler runs a node where its weights
  // and cache are).
  std::vector<std::string> kept_on_cpu;
};

// The placement a session uses on `device`: plan_placement() for the request, less what the
// device cannot use. The device is asked about the nodes of a decode step, two-token and
// n_batch-token prompts (both MLA forms) and a cache shift.
OffloadPlan plan_offload(const Model& model, const PlacementRequest& request, int64_t n_ctx, ggl::Type cache_type,
                         int64_t n_batch, const ggl::Backend& device);

// The file tensors the placement puts on the GPU, and per layer the device holding its cache
// (nullptr: host memory).
std::set<std::string> gpu_tensor_names(const Placement& p);
std::vector<ggl::Backend*> cache_devices(const Placement& p, int64_t n_layer, ggl::Backend& device);

}  // namespace latte
