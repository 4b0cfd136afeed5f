// The backends of this build and machine, for callers that must not know them by name (src/).
// Device backends come first, in order of preference, the CPU last.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "ggml-like/backend/backend.h"

namespace ggl {

struct BackendOptions {
  int n_threads = 0;  // CPU threads; 0: one per physical core
  // Also the GPUs found (one backend each). Off until weights can be loaded onto them: a
  // session's graphs read host memory only, so they would all run on the CPU anyway.
  bool gpus = false;
};

// An accelerator this build can use, with its memory as the driver reports it now.
struct GpuDevice {
  std::string name;  // e.g. "CUDA0: NVIDIA H100 80GB HBM3 (sm_90)"
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};

struct GpuDevices {
  std::vector<GpuDevice> devices;
  std::string why_none;  // when devices is empty: "built without CUDA", "no CUDA device: ..."
};

// Asks the driver once per call (cheap: no context is kept).
GpuDevices gpu_devices();
// Whether this build has a GPU backend at all (LATTE_CUDA).
bool built_with_gpu();

std::vector<std::unique_ptr<Backend>> available_backends(const BackendOptions& options);
// The CPU alone when it is the only backend, else a Scheduler (scheduler.h) over all of them.
std::unique_ptr<Backend> make_backend(const BackendOptions& options);

}  // namespace ggl
