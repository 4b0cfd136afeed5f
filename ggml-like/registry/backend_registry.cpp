// The one place that names concrete backends.
#include "ggml-like/registry/backend_registry.h"

#include <fmt/format.h>

#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/backend/scheduler.h"
#ifdef LATTE_CUDA
#include "ggml-like/cuda/cuda_backend.h"
#include "ggml-like/cuda/cuda_device.h"
#endif

namespace ggl {

bool built_with_gpu() {
#ifdef LATTE_CUDA
  return true;
#else
  return false;
#endif
}

GpuDevices gpu_devices() {
  GpuDevices out;
#ifdef LATTE_CUDA
  const CudaDiscovery found = discover_cuda_devices();
  for (const CudaDeviceInfo& d : found.devices)
    out.devices.push_back(
        {fmt::format("CUDA{}: {} (sm_{}{})", d.index, d.name, d.major, d.minor), d.free_bytes, d.total_bytes});
  out.why_none = found.why_none;
#else
  out.why_none = "built without CUDA";
#endif
  return out;
}

std::vector<std::unique_ptr<Backend>> available_backends(const BackendOptions& options) {
  std::vector<std::unique_ptr<Backend>> out;
#ifdef LATTE_CUDA
  if (options.gpus)
    for (const CudaDeviceInfo& d : discover_cuda_devices().devices)
      out.push_back(std::make_unique<CudaBackend>(d.index));
#endif
  out.push_back(std::make_unique<CpuBackend>(options.n_threads));
  return out;
}

std::unique_ptr<Backend> make_backend(const BackendOptions& options) {
  auto backends = available_backends(options);
  if (backends.size() == 1) return std::move(backends.front());
  return std::make_unique<Scheduler>(std::move(backends));
}

}  // namespace ggl
