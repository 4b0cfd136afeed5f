// The CPU executor skips barriers between nodes that do not depend on each other through memory,
// and between single-row nodes that thread 0 runs alone. These tests check both that barriers are
// actually skipped and that the results equal a one-thread run (which has no barriers at all).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <vector>

#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/graph/graph.h"

namespace test_cpu_barriers {

using ggl::Graph;
using ggl::Tensor;
using ggl::Type;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A decode-shaped block: two projections of one input (independent), a chain of one-row
// element-wise ops, a projection of the chain's result, and a residual add. The arena reuses
// memory along the chain, so write-after-read hazards are exercised too.
struct Block {
  int64_t K = 1024, N = 1024;
  std::vector<float> w1 = random_floats(K * N, 1), w2 = random_floats(K * N, 2), w3 = random_floats(N * N, 3),
                     x = random_floats(K, 4);

  Tensor* build(Graph& g) {
    Tensor* xt = g.external(Type::F32, std::vector<int64_t>{K}, x.data(), "x");
    Tensor* a = g.mul_mat(g.external(Type::F32, std::vector<int64_t>{K, N}, w1.data(), "w1"), xt);
    Tensor* b = g.mul_mat(g.external(Type::F32, std::vector<int64_t>{K, N}, w2.data(), "w2"), xt);
    Tensor* h = g.swiglu(a, b);
    for (int i = 0; i < 6; ++i) h = g.add(g.scale(g.rms_norm(h, 1e-6f), 0.5f), h);
    Tensor* out = g.add(g.mul_mat(g.external(Type::F32, std::vector<int64_t>{N, N}, w3.data(), "w3"), h), a);
    g.mark_output(out);
    return out;
  }
};

std::vector<float> run(Block& block, int threads, int* barriers = nullptr, int* team = nullptr) {
  Graph g;
  Tensor* out = block.build(g);
  ggl::CpuBackend backend(threads);
  backend.compute(g);
  if (barriers) *barriers = backend.last_barriers();
  if (team) *team = backend.last_threads();
  const auto* p = static_cast<const float*>(out->data);
  return {p, p + out->n_elements()};
}

TEST(CpuBarriers, SkipsBarriersBetweenIndependentAndSingleThreadNodes) {
  Block block;
  int barriers = -1, team = 0;
  const std::vector<float> one = run(block, 1);
  const std::vector<float> two = run(block, 2, &barriers, &team);
  ASSERT_EQ(team, 2) << "the block is large enough for two threads";
  // w1 and w2 need no barrier between them; the one-row chain (19 nodes) runs on thread 0
  // without any; only the edges into and out of the team-wide matmuls need one: before the
  // chain, before mul_mat(w3) and before the final add.
  EXPECT_LE(barriers, 3);
  EXPECT_GE(barriers, 2);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) ASSERT_EQ(one[i], two[i]) << "at " << i;
}

TEST(CpuBarriers, ManyThreadsAgreeWithOne) {
  Block block;
  const std::vector<float> one = run(block, 1);
  for (int threads : {2, 3, 4}) {
    for (int rep = 0; rep < 20; ++rep) {
      const std::vector<float> many = run(block, threads);
      for (size_t i = 0; i < one.size(); ++i) ASSERT_EQ(one[i], many[i]) << threads << " threads, at " << i;
    }
  }
}

// With profiling on (cpu_profile.h) the backend times every node on every thread of the team:
// the products and the chain's nodes have run times, leaves none, and only the nodes after a
// barrier can have waited; their sum stays within the wall time of the compute. Off, the profile
// is empty.
TEST(CpuBarriers, ProfileTimesEveryNodeOnEveryThread) {
  Block block;
  for (int threads : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    Graph g;
    block.build(g);
    ggl::CpuBackend backend(threads);
    ggl::set_cpu_profiling(true);
    const auto start = std::chrono::steady_clock::now();
    backend.compute(g);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ggl::set_cpu_profiling(false);
    const ggl::CpuProfile& p = backend.last_profile();
    ASSERT_EQ(p.threads, backend.last_threads());
    ASSERT_EQ(p.run.size(), g.nodes().size() * p.threads);
    ASSERT_EQ(p.wait.size(), p.run.size());
    double per_thread_total = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const Tensor& n = *g.nodes()[i];
      for (int t = 0; t < p.threads; ++t) {
        if (n.op == ggl::Op::kLeaf || n.op == ggl::Op::kView) {
          EXPECT_EQ(p.run_of(i, t), 0.0) << i;
          continue;
        }
        if (n.op == ggl::Op::kMulMat) {
          EXPECT_GT(p.run_of(i, t), 0.0) << "node " << i << ", thread " << t;
        }
        EXPECT_GE(p.wait_before(i, t), 0.0);
        if (t == 0) per_thread_total += p.run_of(i, t) + p.wait_before(i, t);
      }
    }
    EXPECT_GT(per_thread_total, 0.0);
    EXPECT_LE(per_thread_total, wall);
    backend.compute(g);
    EXPECT_EQ(backend.last_profile().threads, 0) << "profiling off";
    EXPECT_TRUE(backend.last_profile().run.empty());
  }
}

}  // namespace test_cpu_barriers
