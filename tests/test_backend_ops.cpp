// Every op of every backend besides the CPU, against the CPU backend, one table of cases: the
// inputs are uploaded into the backend's memory, the node runs there, the result comes back.
// Skips, saying why, where there is no such backend (a build without CUDA, or no GPU): the CUDA
// kernels have so far only been compiled, never run (docs/offload.md).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/graph/backend_registry.h"
#include "ggml-like/graph/graph.h"
#include "tests/random_floats.h"

namespace {

using ggl::Backend;
using latte::testing::random_floats;
using ggl::Graph;
using ggl::Tensor;
using ggl::Type;

// Makes an f32 leaf of shape ne with values drawn from seed, in the memory of the backend the
// graph will run on.
using Leaf = std::function<Tensor*(Graph&, std::vector<int64_t> ne, uint32_t seed)>;

struct OpCase {
  const char* name;
  std::function<Tensor*(Graph&, const Leaf&)> build;
  float tolerance;  // relative to the largest magnitude of the result
};

size_t count(const std::vector<int64_t>& ne) {
  size_t n = 1;
  for (int64_t d : ne) n *= static_cast<size_t>(d);
  return n;
}

const std::vector<OpCase>& cases() {
  static const std::vector<OpCase> all = {
      {"rms_norm", [](Graph& g, const Leaf& l) { return g.rms_norm(l(g, {64, 7}, 1), 1e-6f); }, 1e-5f},
      {"add_broadcast", [](Graph& g, const Leaf& l) { return g.add(l(g, {64, 6, 2}, 2), l(g, {64, 1, 2}, 3)); }, 1e-6f},
      {"mul_row", [](Graph& g, const Leaf& l) { return g.mul(l(g, {33, 5}, 4), l(g, {33}, 5)); }, 1e-6f},
      {"div", [](Graph& g, const Leaf& l) { return g.div(l(g, {16, 4}, 6), g.scale(l(g, {16, 4}, 7), 3.0f)); }, 1e-5f},
      {"silu", [](Graph& g, const Leaf& l) { return g.silu(l(g, {257, 3}, 8)); }, 1e-5f},
      {"sigmoid", [](Graph& g, const Leaf& l) { return g.sigmoid(l(g, {257, 3}, 9)); }, 1e-5f},
      {"swiglu", [](Graph& g, const Leaf& l) { return g.swiglu(l(g, {128, 5}, 10), l(g, {128, 5}, 11)); }, 1e-5f},
      {"softmax", [](Graph& g, const Leaf& l) { return g.softmax(g.scale(l(g, {1000, 4}, 12), 4.0f)); }, 1e-5f},
      {"mul_mat", [](Graph& g, const Leaf& l) { return g.mul_mat(l(g, {96, 40}, 13), l(g, {96, 9}, 14)); }, 1e-5f},
      {"mul_mat_strided_x",
       [](Graph& g, const Leaf& l) {
         Tensor* wide = l(g, {128, 9}, 15);
         Tensor* x = g.view(wide, {96, 9, 1, 1}, {4, 128 * 4, 128 * 4 * 9, 128 * 4 * 9}, 0);
         return g.mul_mat(l(g, {96, 33}, 16), x);
       },
       1e-5f},
      {"norm_matmul_silu_chain",
       [](Graph& g, const Leaf& l) {
         Tensor* n = g.mul(g.rms_norm(l(g, {64, 3}, 17), 1e-5f), l(g, {64}, 18));
         return g.silu(g.mul_mat(l(g, {64, 48}, 19), n));
       },
       1e-5f},
  };
  return all;
}

// Runs a case on a backend: leaves in its memory (uploaded), the result read back.
std::vector<float> run_case(const OpCase& c, Backend& backend) {
  std::vector<std::unique_ptr<ggl::BackendBuffer>> buffers;
  std::vector<std::vector<float>> host;
  const Leaf leaf = [&](Graph& g, std::vector<int64_t> ne, uint32_t seed) {
    host.push_back(random_floats(count(ne), seed));
    const size_t bytes = host.back().size() * sizeof(float);
    void* data = host.back().data();
    if (backend.memory() == ggl::Memory::kDevice) {
      buffers.push_back(backend.allocate(bytes));
      backend.upload(buffers.back()->base(), data, bytes);
      data = buffers.back()->base();
    }
    return g.external(Type::F32, ne, data, "leaf");
  };
  Graph g;
  Tensor* out = c.build(g, leaf);
  g.mark_output(out);
  backend.synchronize();
  backend.compute(g);
  std::vector<float> result(static_cast<size_t>(out->n_elements()));
  backend.read(*out, result.data(), 0, result.size() * sizeof(float));
  return result;
}

TEST(BackendOps, EveryOpAgainstTheCpu) {
  auto backends = ggl::available_backends({.n_threads = 1, .gpus = true});
  backends.pop_back();  // the CPU, the reference
  if (backends.empty()) GTEST_SKIP() << "SKIPPED: no GPU backend (" << ggl::gpu_devices().why_none << ")";
  ggl::CpuBackend cpu(1);
  for (auto& backend : backends)
    for (const OpCase& c : cases()) {
      const std::vector<float> want = run_case(c, cpu);
      const std::vector<float> got = run_case(c, *backend);
      ASSERT_EQ(got.size(), want.size()) << backend->name() << " " << c.name;
      float scale = 0.0f;
      for (float v : want) scale = std::max(scale, std::fabs(v));
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got[i], want[i], c.tolerance * std::max(scale, 1.0f)) << backend->name() << " " << c.name << " at " << i;
    }
}

TEST(BackendOps, UnsupportedOpsAreDeclined) {
  auto backends = ggl::available_backends({.n_threads = 1, .gpus = true});
  backends.pop_back();
  if (backends.empty()) GTEST_SKIP() << "SKIPPED: no GPU backend (" << ggl::gpu_devices().why_none << ")";
  Graph g;
  std::vector<float> x(64 * 2);
  std::vector<int32_t> pos = {0, 1};
  Tensor* rope = g.rope(g.external(Type::F32, std::vector<int64_t>{64, 1, 2}, x.data(), "x"), g.input_i32(pos, "pos"),
                        {.n_rot = 64});
  for (auto& backend : backends) {
    EXPECT_FALSE(backend->supports_op(*rope)) << backend->name() << ": rope has no kernel yet";
    EXPECT_THROW(backend->compute(g), ggl::Error) << backend->name();
  }
}

}  // namespace
