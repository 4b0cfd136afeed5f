// Every op of every backend besides the CPU, against the CPU backend, one table of cases: the
// inputs are uploaded into the backend's memory, the node runs there, the result comes back.
// Skips, saying why, where there is no such backend (a build without CUDA, or no GPU): the CUDA
// kernels have so far only been compiled, never run (docs/offload.md).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/graph/backend_registry.h"
#include "ggml-like/graph/graph.h"
#include "tests/random_floats.h"

namespace {

using ggl::Backend;
using latte::testing::random_floats;
using latte::testing::weight_types;
using ggl::Graph;
using ggl::Tensor;
using ggl::Type;

// Makes leaves in the memory of the backend the graph will run on: l(g, ne, seed) an f32 one with
// values drawn from seed, l(g, type, ne, seed) weights of any type (rows of random values quantized
// by the reference quantizers), l.ids(g, ne, values) i32 ids.
struct Leaf {
  std::function<Tensor*(Graph&, Type, std::vector<int64_t>, uint32_t)> make;
  std::function<Tensor*(Graph&, std::vector<int64_t>, std::vector<int32_t>)> make_ids;
  Tensor* operator()(Graph& g, std::vector<int64_t> ne, uint32_t seed) const { return make(g, Type::F32, ne, seed); }
  Tensor* operator()(Graph& g, Type t, std::vector<int64_t> ne, uint32_t seed) const { return make(g, t, ne, seed); }
  Tensor* ids(Graph& g, std::vector<int64_t> ne, std::vector<int32_t> values) const { return make_ids(g, ne, values); }
};

struct OpCase {
  const char* name;
  std::function<Tensor*(Graph&, const Leaf&)> build;
  float tolerance;  // relative to the largest magnitude of the result
  // Cases over weight types instead: built by typed once per type in types.
  std::function<Tensor*(Graph&, const Leaf&, Type)> typed = {};
  std::vector<Type> types = {};
};

size_t count(const std::vector<int64_t>& ne) {
  size_t n = 1;
  for (int64_t d : ne) n *= static_cast<size_t>(d);
  return n;
}

// Products with weights of type t and m columns of 512 values: 37 output rows (not a multiple of
// the kernels' rows per block). m <= 8 takes the mat-vec kernels, more the dequantize + cuBLAS path.
OpCase mul_mat_case(const char* name, int64_t m) {
  return {name, nullptr, 5e-3f,
          [m](Graph& g, const Leaf& l, Type t) { return g.mul_mat(l(g, t, {512, 37}, 30), l(g, {512, m}, 31)); },
          weight_types()};
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
      // CPU products with quantized weights quantize the activations (16-bit; 8-bit in the routed
      // experts), hence the looser tolerances; a wrong row or block is off by the result's scale.
      mul_mat_case("mul_mat_w_1col", 1),
      mul_mat_case("mul_mat_w_3cols", 3),
      mul_mat_case("mul_mat_w_8cols", 8),
      mul_mat_case("mul_mat_w_40cols", 40),
      // Weights broadcast over batches of strided activations, on both paths.
      {"mul_mat_w_broadcast_5cols", nullptr, 5e-3f,
       [](Graph& g, const Leaf& l, Type t) {
         Tensor* x = g.view(l(g, {300, 5, 4, 2}, 33), {256, 5, 4, 2}, {4, 300 * 4, 300 * 4 * 5, 300 * 4 * 5 * 4}, 0);
         return g.mul_mat(l(g, t, {256, 19, 2, 1}, 32), x);
       },
       {Type::F32, Type::F16, Type::Q4_0, Type::Q4_K}},
      {"mul_mat_w_broadcast_12cols", nullptr, 5e-3f,
       [](Graph& g, const Leaf& l, Type t) {
         Tensor* x = g.view(l(g, {300, 12, 4, 2}, 35), {256, 12, 4, 2}, {4, 300 * 4, 300 * 4 * 12, 300 * 4 * 12 * 4}, 0);
         return g.mul_mat(l(g, t, {256, 19, 1, 2}, 34), x);
       },
       {Type::F32, Type::F16, Type::Q4_0, Type::Q4_K}},
      {"mul_mat_t_w", nullptr, 1e-4f,
       [](Graph& g, const Leaf& l, Type t) {
         Tensor* w = l(g, t, {256, 48, 2}, 36);
         return g.add(g.mul_mat_t(w, l(g, {48, 3, 2}, 37)), g.mul_mat_t(w, l(g, {48, 1, 2}, 38)));
       },
       weight_types()},
      {"mul_mat_t_w_40cols", nullptr, 1e-4f,
       [](Graph& g, const Leaf& l, Type t) { return g.mul_mat_t(l(g, t, {512, 24}, 39), l(g, {24, 40}, 40)); },
       weight_types()},
      {"mul_mat_id_w", nullptr, 2e-2f,
       [](Graph& g, const Leaf& l, Type t) {
         Tensor* w = l(g, t, {256, 21, 4}, 41);
         Tensor* ids = l.ids(g, {2, 5}, {3, 0, 1, 3, 2, 2, 0, 1, 3, 1});
         // One activation column per token (gate / up) and one per (slot, token) (down).
         return g.add(g.mul_mat_id(w, l(g, {256, 1, 5}, 42), ids), g.mul_mat_id(w, l(g, {256, 2, 5}, 43), ids));
       },
       weight_types()},
      {"get_rows_w", nullptr, 1e-6f,
       [](Graph& g, const Leaf& l, Type t) {
         Tensor* flat = g.get_rows(l(g, t, {256, 10}, 44), l.ids(g, {6}, {9, 0, 4, 4, 7, 1}));
         Tensor* batched = g.get_rows(l(g, t, {256, 10, 2}, 45), l.ids(g, {6, 2}, {9, 0, 4, 4, 7, 1, 2, 3, 8, 5, 6, 0}));
         return g.add(batched, flat);
       },
       weight_types()},
      {"norm_matmul_silu_chain",
       [](Graph& g, const Leaf& l) {
         Tensor* n = g.mul(g.rms_norm(l(g, {64, 3}, 17), 1e-5f), l(g, {64}, 18));
         return g.silu(g.mul_mat(l(g, {64, 48}, 19), n));
       },
       1e-5f},
  };
  return all;
}

// Runs a case (with weight type t where it is typed) on a backend: leaves in its memory
// (uploaded), the result read back.
std::vector<float> run_case(const OpCase& c, Type t, Backend& backend) {
  std::vector<std::unique_ptr<ggl::BackendBuffer>> buffers;
  std::vector<std::vector<uint8_t>> host;
  const auto place = [&](Graph& g, Type type, const std::vector<int64_t>& ne) {
    void* data = host.back().data();
    if (backend.memory() == ggl::Memory::kDevice) {
      buffers.push_back(backend.allocate(host.back().size()));
      backend.upload(buffers.back()->base(), data, host.back().size());
      data = buffers.back()->base();
    }
    return g.external(type, ne, data, "leaf");
  };
  Leaf leaf;
  leaf.make = [&](Graph& g, Type type, std::vector<int64_t> ne, uint32_t seed) {
    if (type == Type::F32) {
      const std::vector<float> values = random_floats(count(ne), seed);
      host.emplace_back(reinterpret_cast<const uint8_t*>(values.data()),
                        reinterpret_cast<const uint8_t*>(values.data() + values.size()));
    } else {
      std::mt19937 rng(seed);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      host.push_back(latte::testing::quantized_rows(type, static_cast<int64_t>(count(ne)) / ne[0], ne[0], rng, normal).bytes);
    }
    return place(g, type, ne);
  };
  leaf.make_ids = [&](Graph& g, std::vector<int64_t> ne, std::vector<int32_t> values) {
    host.emplace_back(reinterpret_cast<const uint8_t*>(values.data()),
                      reinterpret_cast<const uint8_t*>(values.data() + values.size()));
    return place(g, Type::I32, ne);
  };
  Graph g;
  Tensor* out = c.typed ? c.typed(g, leaf, t) : c.build(g, leaf);
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
    for (const OpCase& c : cases())
      for (Type t : c.typed ? c.types : std::vector<Type>{Type::F32}) {
        const std::string what = std::string(backend->name()) + " " + c.name + (c.typed ? " " + std::string(ggl::type_name(t)) : "");
        const std::vector<float> want = run_case(c, t, cpu);
        const std::vector<float> got = run_case(c, t, *backend);
        ASSERT_EQ(got.size(), want.size()) << what;
        float scale = 0.0f;
        for (float v : want) scale = std::max(scale, std::fabs(v));
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(got[i], want[i], c.tolerance * std::max(scale, 1.0f)) << what << " at " << i;
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
