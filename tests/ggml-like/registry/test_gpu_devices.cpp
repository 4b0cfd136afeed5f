// GPU discovery through the backend registry: a build without CUDA says so; a CUDA build lists
// the devices with their memory, or (on a machine with the toolkit and no GPU, like CI) gives
// the runtime's reason in one line (and the device tests skip there, saying why).
#include <gtest/gtest.h>

#include "ggml-like/registry/backend_registry.h"

namespace test_gpu_devices {

TEST(GpuDevices, FoundOrWhyNot) {
  const ggl::GpuDevices gpus = ggl::gpu_devices();
  if (!ggl::built_with_gpu()) {
    EXPECT_TRUE(gpus.devices.empty());
    EXPECT_EQ(gpus.why_none, "built without CUDA");
    return;
  }
  if (gpus.devices.empty()) {
    EXPECT_EQ(gpus.why_none.rfind("no CUDA device", 0), 0u) << gpus.why_none;
    EXPECT_EQ(gpus.why_none.find('\n'), std::string::npos);
    GTEST_SKIP() << "SKIPPED: " << gpus.why_none;
  }
  for (const ggl::GpuDevice& d : gpus.devices) {
    EXPECT_EQ(d.name.rfind("CUDA", 0), 0u) << d.name;
    EXPECT_GT(d.total_bytes, 0u) << d.name;
    EXPECT_LE(d.free_bytes, d.total_bytes) << d.name;
  }
}

}  // namespace test_gpu_devices
