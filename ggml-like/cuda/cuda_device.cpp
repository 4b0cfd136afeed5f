#include "ggml-like/cuda/cuda_device.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

namespace ggl {

CudaDiscovery discover_cuda_devices() {
  CudaDiscovery out;
  int count = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    out.why_none = fmt::format("no CUDA device ({}: {})", cudaGetErrorName(e), cudaGetErrorString(e));
    return out;
  }
  if (count == 0) {
    out.why_none = "no CUDA device";
    return out;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (const cudaError_t e = cudaGetDeviceProperties(&prop, i); e != cudaSuccess) {
      out.why_none = fmt::format("CUDA device {}: {}", i, cudaGetErrorString(e));
      continue;
    }
    CudaDeviceInfo d{i, prop.name, prop.major, prop.minor, 0, prop.totalGlobalMem};
    // Free memory needs a context on the device (made here, kept by the runtime for later use).
    if (cudaSetDevice(i) == cudaSuccess) {
      size_t free = 0, total = 0;
      if (cudaMemGetInfo(&free, &total) == cudaSuccess) d.free_bytes = free, d.total_bytes = total;
    }
    out.devices.push_back(std::move(d));
  }
  return out;
}

}  // namespace ggl
