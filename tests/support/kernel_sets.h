// Runs a test body once with each CPU kernel set this build has and this CPU
// runs in use (ggml-like/cpu/kernel_set.h), so every path is checked wherever it
// exists, and restores the set that was in use.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "ggml-like/cpu/kernel_set.h"

namespace latte::testing {

template <class Body> void for_each_kernel_set(Body body) {
  const ggl::CpuKernels &before = ggl::cpu_kernels();
  for (const ggl::CpuKernels *k : ggl::runnable_cpu_kernels()) {
    ggl::set_cpu_kernels(*k);
    SCOPED_TRACE(std::string("kernel set ") + k->isa);
    body(*k);
  }
  ggl::set_cpu_kernels(before);
}

} // namespace latte::testing
