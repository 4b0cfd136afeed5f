// Which CUDA devices this process can use, asked of the CUDA runtime. A machine with the toolkit
// but no GPU (or a driver older than the runtime) answers with an error code on the first call;
// that becomes a reason in words, never an abort: latte then runs on the CPU.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace ggl {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  size_t free_bytes = 0, total_bytes = 0;
};

struct CudaDiscovery {
  std::vector<CudaDeviceInfo> devices;
  std::string why_none;  // set when devices is empty, e.g. "no CUDA device (CUDA driver version is insufficient ...)"
};

CudaDiscovery discover_cuda_devices();

}  // namespace ggl
