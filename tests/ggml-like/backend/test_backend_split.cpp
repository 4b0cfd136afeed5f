// The backend interface and the scheduler that cuts a graph at placement boundaries. A second
// backend is simulated by a "device" (tests/support/simulated_device.h) that keeps its bytes apart from
// the CPU's (its own buffers), runs a chosen subset of ops with the CPU's kernels, and checks that
// every leaf it is given lies in its own memory; the CPU side checks the reverse. A split graph must then give exactly the
// CPU's results (same kernels, one thread), with the copies the placement implies.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/registry/backend_registry.h"
#include "ggml-like/graph/graph.h"
#include "ggml-like/backend/scheduler.h"
#include "src/model/forward.h"
#include "src/model/kv_cache.h"
#include "src/model/model.h"
#include "tests/support/random_floats.h"
#include "tests/support/simulated_device.h"
#include "tests/support/test_support.h"

namespace test_backend_split {

using ggl::Backend;
using ggl::Graph;
using ggl::Op;
using ggl::Tensor;
using ggl::Type;
using latte::testing::random_floats;

using FakeDevice = latte::testing::SimulatedDevice;
using latte::testing::CheckedCpu;

// x -> norm * g -> w1 (silu) -> w2 -> + x -> softmax -> top_k: w1 and g may move to the device.
struct SmallNet {
  static constexpr int64_t D = 64, H = 96, T = 5;
  std::vector<float> x = random_floats(D * T, 1), g = random_floats(D, 2), w1 = random_floats(D * H, 3),
                     w2 = random_floats(H * D, 4);
  Graph graph;
  Tensor *xin, *gw, *w1t, *w2t, *probs, *top;
  SmallNet() {
    xin = graph.input(Type::F32, std::vector<int64_t>{D, T}, "x");
    std::memcpy(xin->data, x.data(), x.size() * sizeof(float));
    gw = graph.external(Type::F32, std::vector<int64_t>{D}, g.data(), "g");
    w1t = graph.external(Type::F32, std::vector<int64_t>{D, H}, w1.data(), "w1");
    w2t = graph.external(Type::F32, std::vector<int64_t>{H, D}, w2.data(), "w2");
    Tensor* n = graph.mul(graph.rms_norm(xin, 1e-5f), gw);
    Tensor* h = graph.silu(graph.mul_mat(w1t, n));
    Tensor* y = graph.add(graph.mul_mat(w2t, h), xin);
    probs = graph.softmax(y);
    top = graph.top_k(probs, {.k = 3});
    graph.mark_output(probs);
    graph.mark_output(top);
  }
};

template <typename T>
std::vector<T> read_all(Backend& b, const Tensor& t) {
  std::vector<T> out(static_cast<size_t>(t.n_elements()));
  b.read(t, out.data(), 0, out.size() * sizeof(T));
  return out;
}

TEST(BackendSplit, SmallGraphAcrossDeviceAndCpuMatchesCpu) {
  SmallNet ref;
  ggl::CpuBackend cpu(1);
  cpu.compute(ref.graph);
  const auto want_probs = read_all<float>(cpu, *ref.probs);
  const auto want_top = read_all<int32_t>(cpu, *ref.top);

  auto device = std::make_unique<FakeDevice>(std::set<Op>{Op::kMul, Op::kMulMat, Op::kSilu, Op::kAdd, Op::kRmsNorm});
  FakeDevice& dev = *device;
  auto checked = std::make_unique<CheckedCpu>(&dev);
  CheckedCpu& host = *checked;
  std::vector<std::unique_ptr<Backend>> list;
  list.push_back(std::move(device));
  list.push_back(std::move(checked));
  ggl::Scheduler sched(std::move(list));

  SmallNet net;
  dev.take(net.gw);
  dev.take(net.w1t);
  sched.compute(net.graph);
  EXPECT_EQ(read_all<float>(sched, *net.probs), want_probs);
  EXPECT_EQ(read_all<int32_t>(sched, *net.top), want_top);

  // The graph starts on the host, so rms_norm (no leaves) runs there; mul (g) and mul_mat (w1)
  // are pinned to the device and silu follows them; mul_mat (w2) is pinned to the host, and
  // add, softmax and top_k stay there.
  const ggl::SplitPlan& plan = sched.last_split();
  ASSERT_EQ(plan.parts.size(), 3u);
  EXPECT_EQ(plan.parts[0].backend, 1);
  EXPECT_EQ(plan.parts[1].backend, 0);
  EXPECT_EQ(plan.parts[2].backend, 1);
  EXPECT_EQ(plan.parts[0].nodes.size(), 1u);
  EXPECT_EQ(plan.parts[1].nodes.size(), 3u);
  // Crossing: the normed x to the device, silu's output back ([H, T]). The input x is read only by
  // host parts, and the host reads it where it is.
  const size_t f = sizeof(float);
  EXPECT_EQ(plan.crossing_bytes, SmallNet::D * SmallNet::T * f + SmallNet::H * SmallNet::T * f);
  EXPECT_EQ(plan.crossings.size(), 2u);
  EXPECT_EQ(dev.graphs, 1);
  EXPECT_EQ(host.graphs, 2);
}

TEST(BackendSplit, GraphInputsAreCopiedToTheDevice) {
  SmallNet ref;
  ggl::CpuBackend cpu(1);
  cpu.compute(ref.graph);
  auto device = std::make_unique<FakeDevice>(std::set<Op>{Op::kMul, Op::kMulMat, Op::kSilu, Op::kAdd, Op::kRmsNorm});
  FakeDevice& dev = *device;
  std::vector<std::unique_ptr<Backend>> list;
  list.push_back(std::move(device));
  list.push_back(std::make_unique<CheckedCpu>(&dev));
  ggl::Scheduler sched(std::move(list));
  SmallNet net;
  for (Tensor* w : {net.gw, net.w1t, net.w2t}) dev.take(w);
  // rms_norm reads only the input and runs where the graph starts (the host); the device runs
  // the rest up to softmax, which it lacks. add reads the input x there: x is copied over.
  sched.compute(net.graph);
  EXPECT_EQ(read_all<float>(sched, *net.probs), read_all<float>(cpu, *ref.probs));
  const ggl::SplitPlan& plan = sched.last_split();
  ASSERT_EQ(plan.parts.size(), 3u);  // rms_norm on the host, the device's run, softmax + top_k
  bool input_crossed = false;
  for (const ggl::Crossing& c : plan.crossings) input_crossed |= c.from_part < 0 && c.tensor->name == "x";
  EXPECT_TRUE(input_crossed) << "add reads x on the device";
}

TEST(BackendSplit, UnplaceableNodesAreErrors) {
  auto device = std::make_unique<FakeDevice>(std::set<Op>{Op::kRmsNorm});  // no mul_mat
  FakeDevice& dev = *device;
  std::vector<std::unique_ptr<Backend>> list;
  list.push_back(std::move(device));
  list.push_back(std::make_unique<ggl::CpuBackend>(1));
  ggl::Scheduler sched(std::move(list));
  {
    SmallNet net;
    dev.take(net.w1t);
    try {
      sched.compute(net.graph);
      FAIL() << "expected an error";
    } catch (const ggl::Error& e) {
      EXPECT_STREQ(e.what(), "scheduler: sim-gpu holds 'w1' but cannot run mul_mat on it");
    }
  }
  {
    // mul reads the device's g and a host leaf.
    Graph g;
    std::vector<float> a(8, 1.0f), b(8, 2.0f);
    Tensor* ta = g.external(Type::F32, std::vector<int64_t>{8}, a.data(), "a");
    Tensor* tb = g.external(Type::F32, std::vector<int64_t>{8}, b.data(), "b");
    dev.take(ta);
    g.mark_output(g.mul(ta, tb));
    try {
      sched.compute(g);
      FAIL() << "expected an error";
    } catch (const ggl::Error& e) {
      EXPECT_STREQ(e.what(), "scheduler: mul reads 'a' on sim-gpu and 'b' in host memory");
    }
  }
}

TEST(BackendSplit, OneBackendRunsTheGraphWhole) {
  std::vector<std::unique_ptr<Backend>> list;
  list.push_back(std::make_unique<ggl::CpuBackend>(1));
  ggl::Scheduler sched(std::move(list));
  SmallNet net, ref;
  sched.compute(net.graph);
  ggl::CpuBackend cpu(1);
  cpu.compute(ref.graph);
  EXPECT_EQ(sched.last_split().parts.size(), 1u);
  EXPECT_EQ(sched.last_split().crossing_bytes, 0u);
  EXPECT_EQ(read_all<float>(sched, *net.probs), read_all<float>(cpu, *ref.probs));
  EXPECT_THROW(sched.read(*net.probs, nullptr, 0, 1u << 30), ggl::Error);
}

TEST(BackendSplit, BuffersAndCopies) {
  FakeDevice dev(std::set<Op>{});
  ggl::CpuBackend cpu(1);
  std::vector<uint8_t> host(1000);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i * 7);
  const void* inside = nullptr;
  {
    auto a = dev.allocate(1000), b = dev.allocate(1000);
    EXPECT_TRUE(dev.holds(a->base()) && dev.holds(a->base() + 999) && dev.holds(b->base()));
    EXPECT_FALSE(dev.holds(host.data()));
    EXPECT_FALSE(cpu.holds(a->base()));
    ggl::copy_between(cpu, host.data(), dev, a->base(), 1000);
    ggl::copy_between(dev, a->base(), dev, b->base(), 1000);
    std::vector<uint8_t> back(1000);
    ggl::copy_between(dev, b->base(), cpu, back.data(), 1000);
    EXPECT_EQ(back, host);
    inside = a->base();
  }
  EXPECT_FALSE(dev.holds(inside)) << "a freed buffer is no longer the device's";
}

TEST(BackendSplit, TheRegistryOffersTheCpuLast) {
  auto list = ggl::available_backends({.n_threads = 1});
  ASSERT_FALSE(list.empty());
  EXPECT_EQ(list.back()->name(), "cpu");
  EXPECT_EQ(list.back()->memory(), ggl::Memory::kHost);
}

// A real model's forward graph with one layer's attention (its weights and latent cache) on the
// device: the logits equal the CPU's, and the activations crossing per token are those of the
// placement boundaries.
TEST(BackendSplit, ModelLayerOnDeviceMatchesCpu) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-f32.gguf");
  const auto path = latte::testing::shared_dir() / "fixtures/ds2-v2-tiny-f32.gguf";
  const latte::Model model(path.string());
  const std::vector<int32_t> tokens = {1, 5, 9, 200, 17, 3};
  auto logits = [&](Backend& backend, bool offload, FakeDevice* dev) {
    latte::KvCache cache(model.hparams(), 16, Type::F16);
    Graph g;
    latte::ForwardBatch batch;
    batch.tokens = tokens;
    batch.mla_path = latte::MlaMode::kAbsorb;
    Tensor* out = latte::build_forward(g, model, cache, batch);
    if (offload)
      for (Tensor& t : g.tensors())
        if (t.op == Op::kLeaf && (t.name.rfind("blk.1.attn", 0) == 0 || t.name.rfind("cache.1.", 0) == 0))
          dev->take(&t);
    backend.compute(g);
    return read_all<float>(backend, *out);
  };
  ggl::CpuBackend cpu(1);
  const auto want = logits(cpu, false, nullptr);

  auto device = std::make_unique<FakeDevice>();
  FakeDevice& dev = *device;
  std::vector<std::unique_ptr<Backend>> list;
  list.push_back(std::move(device));
  list.push_back(std::make_unique<CheckedCpu>(&dev));
  ggl::Scheduler sched(std::move(list));
  EXPECT_EQ(logits(sched, true, &dev), want);
  const ggl::SplitPlan& plan = sched.last_split();
  EXPECT_EQ(plan.parts.size(), 3u);
  EXPECT_GT(plan.crossing_bytes, 0u);
  // Per token: the normed input into the device part and the residual it adds to; the residual
  // sum and its norm back out (4 hidden-size vectors), and the position for the rotary embedding.
  const size_t per_token = 4 * static_cast<size_t>(model.hparams().n_embd) * sizeof(float) + sizeof(int32_t);
  EXPECT_EQ(plan.crossing_bytes, tokens.size() * per_token);
}

}  // namespace test_backend_split

namespace test_backend_split {

// Routed experts in host memory: a long enough batch runs the expert product on the device with
// only the experts the routing names copied over; a short one stays on the host.
struct ExpertNet {
  static constexpr int64_t K = 32, N = 24, E = 16, k = 2;
  std::vector<float> router = random_floats(K * E, 11), experts = random_floats(K * N * E, 12);
  Graph graph;
  Tensor *ids, *out;
  explicit ExpertNet(int64_t T) {
    Tensor* x = graph.input(Type::F32, std::vector<int64_t>{K, T}, "x");
    const auto xs = random_floats(K * T, 13);
    std::memcpy(x->data, xs.data(), xs.size() * sizeof(float));
    Tensor* r = graph.external(Type::F32, std::vector<int64_t>{K, E}, router.data(), "router");
    Tensor* w = graph.external(Type::F32, std::vector<int64_t>{K, N, E}, experts.data(), "exps");
    ids = graph.top_k(graph.softmax(graph.mul_mat(r, x)), {.k = static_cast<int>(k)});
    out = graph.mul_mat_id(w, graph.reshape(x, {K, 1, T, 1}), ids);
    graph.mark_output(ids);
    graph.mark_output(out);
  }
};

TEST(BackendSplit, ExpertProductsOfLongBatchesCopyTheUsedExperts) {
  for (const int64_t T : {int64_t{8}, int64_t{7}}) {  // the threshold: 1 token per expert * 16 / 2
    ExpertNet ref(T), net(T);
    ggl::CpuBackend cpu(1);
    cpu.compute(ref.graph);
    const auto want = read_all<float>(cpu, *ref.out);
    std::set<int32_t> used;
    for (int32_t e : read_all<int32_t>(cpu, *ref.ids)) used.insert(e);

    auto device = std::make_unique<FakeDevice>();
    FakeDevice& dev = *device;
    std::vector<std::unique_ptr<Backend>> list;
    list.push_back(std::move(device));
    list.push_back(std::make_unique<CheckedCpu>(&dev));
    ggl::Scheduler sched(std::move(list), {.op_offload = true, .op_offload_min_batch = 1});
    sched.compute(net.graph);
    EXPECT_EQ(read_all<float>(sched, *net.out), want);
    const size_t expert_bytes = ExpertNet::K * ExpertNet::N * sizeof(float);
    if (T < 8) {
      EXPECT_EQ(sched.last_expert_bytes(), 0u);
      EXPECT_EQ(dev.ran[Op::kMulMatId], 0);
      continue;
    }
    ASSERT_LT(used.size(), static_cast<size_t>(ExpertNet::E)) << "pick inputs that leave some expert unused";
    EXPECT_EQ(sched.last_expert_bytes(), used.size() * expert_bytes);
    EXPECT_EQ(dev.ran[Op::kMulMatId], 1);
    EXPECT_GE(dev.uploaded, used.size() * expert_bytes);
    // The routing crossed to the host before the copy.
    bool ids_to_host = false;
    for (const ggl::Crossing& c : sched.last_split().crossings)
      ids_to_host |= c.tensor->name == net.ids->name && c.to_backend == 1;
    EXPECT_TRUE(ids_to_host);
  }
}

}  // namespace test_backend_split
