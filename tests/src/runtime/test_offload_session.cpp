// Sessions that offload to a device, without a GPU: a simulated device (tests/support/simulated_device.h)
// is injected as the session's device. The forward passes of the shared fixtures with full
// offload (-ngl 99), a mixed plan (--cpu-moe) and half the layers must meet the thresholds of
// tests/src/model/test_forward_fixtures.cpp, the device must hold exactly the planned weights and caches
// (it refuses to run on memory it does not hold), and what touches the cache (save/load, shift)
// must work on a device-held cache.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "ggml-like/backend/scheduler.h"
#include "ggml-like/registry/backend_registry.h"
#include "src/runtime/cache_io.h"
#include "src/runtime/cache_shift.h"
#include "src/runtime/session.h"
#include "tests/support/logit_metrics.h"
#include "tests/support/simulated_device.h"
#include "tests/support/test_support.h"

namespace test_offload_session {

using latte::testing::SimulatedDevice;

struct Fixture {
  const char* name;
  const char* gguf;
  const char* tokens;
  const char* reference;
  // Quantized files: the oracle's own distance from the exact logits (test_forward_fixtures.cpp).
  double oracle_nrmse = 0, oracle_kl = 0;
};

const Fixture kFixtures[] = {
    {"ds2-v2-tiny-f32", "fixtures/ds2-v2-tiny-f32.gguf", "fixtures/ds2-v2-tiny-f32.tokens.txt",
     "fixtures/ds2-v2-tiny-f32.logits.f32"},
    {"ds2-mini-mla-f32", "fixtures/ds2-mini-mla-f32.gguf", "fixtures/ds2-mini-mla-f32.tokens.txt",
     "fixtures/ds2-mini-mla-f32.logits.f32"},
    {"ds2-v2-tiny-q8_0", "fixtures/ds2-v2-tiny-q8_0.gguf", "fixtures/ds2-v2-tiny-q8_0.tokens.txt",
     "fixtures/ds2-v2-tiny-q8_0.exact-logits.f32", 0.0187, 0.00189},
    {"ds3-tiny-q4_0", "fixtures/ds3-tiny-q4_0.gguf", "fixtures/ds3-tiny-q4_0.tokens.txt",
     "fixtures/ds3-tiny-q4_0.exact-logits.f32", 0.0753, 0.0292},
    {"llama-gqa-tiny-f32", "fixtures/llama-gqa-tiny-f32.gguf", "fixtures/llama-gqa-tiny-f32.tokens.txt",
     "fixtures/llama-gqa-tiny-f32.logits.f32"},
    {"kq-tiny-q4_k_m", "fixtures/kquant/kq-tiny-q4_k_m.gguf", "fixtures/kquant/kq-tiny.tokens.txt",
     "fixtures/kquant/kq-tiny-q4_k_m.exact-logits.f32", 0.0567, 0.00856},
};

enum class Plan { kAll, kCpuMoe, kHalf };
const char* plan_name(Plan p) { return p == Plan::kAll ? "ngl99" : p == Plan::kCpuMoe ? "cpumoe" : "nglhalf"; }

latte::PlacementRequest request_for(Plan p, int n_layer) {
  latte::PlacementRequest r;
  r.gpu_layers = p == Plan::kHalf ? n_layer / 2 : 99;
  r.cpu_moe = p == Plan::kCpuMoe;
  return r;
}

// Session options that offload to a simulated device; *device is set when the session makes it.
latte::SessionOptions offloading(latte::PlacementRequest request, SimulatedDevice** device,
                                 std::set<ggl::Op> ops = latte::testing::all_ops()) {
  latte::SessionOptions o;
  o.n_threads = 1;
  o.placement = std::move(request);
  o.devices = [device, ops] {
    std::vector<std::unique_ptr<ggl::Backend>> list;
    auto d = std::make_unique<SimulatedDevice>(ops);
    *device = d.get();
    list.push_back(std::move(d));
    return list;
  };
  return o;
}

// The device holds exactly the weights and caches the placement put there.
void expect_device_holds_plan(const latte::Session& s, const SimulatedDevice& dev) {
  ASSERT_NE(s.offload(), nullptr);
  std::set<std::string> gpu;
  std::vector<bool> cache_on_gpu(static_cast<size_t>(s.cache().n_layer()), false);
  for (const latte::PlacedTensor& t : s.offload()->placement.tensors) {
    if (t.device != latte::Device::kGpu) continue;
    if (t.tensor.role == latte::TensorRole::kCache)
      cache_on_gpu[t.tensor.layer] = true;
    else
      gpu.insert(t.tensor.name);
  }
  latte::ModelWeights w = s.weights();
  size_t held = 0;
  latte::for_each_weight(w, [&](latte::WeightRef& r) {
    if (!r) return;
    EXPECT_EQ(dev.holds(r->data), gpu.count(r->name) > 0) << r->name;
    held += dev.holds(r->data);
  });
  EXPECT_GT(held, 0u);
  for (int64_t il = 0; il < s.cache().n_layer(); ++il)
    for (int st = 0; st < s.cache().layout().streams; ++st)
      EXPECT_EQ(dev.holds(s.cache().data(il, st)), cache_on_gpu[il]) << "cache of layer " << il;
}

struct Case {
  int fixture;
  Plan plan;
};

// The fixture's tokens through the session: --cpu-moe the whole prompt at once, long enough for
// the expert products to run on the device with their experts copied over (32 tokens per expert);
// the other plans a prompt of 40 tokens, then decode steps.
std::vector<float> eval_for_plan(latte::Session& s, const latte::Model& model, std::span<const int32_t> all,
                                 Plan plan) {
  std::vector<float> logits;
  if (plan == Plan::kCpuMoe) {
    logits = s.eval(all);
    if (model.hparams().moe.n_expert > 0 &&
        static_cast<int64_t>(all.size()) * model.hparams().moe.n_expert_used >= 32 * model.hparams().moe.n_expert) {
      EXPECT_GT(s.last_traffic().expert_bytes, 0u) << "the experts were not copied to the device";
    }
  } else {
    logits = s.eval(all.first(40));
    for (size_t i = 40; i < all.size(); ++i) {
      const auto step = s.eval(all.subspan(i, 1));
      logits.insert(logits.end(), step.begin(), step.end());
    }
  }
  EXPECT_GT(s.last_traffic().crossing_bytes, 0u);
  return logits;
}

// The logits against the reference within test_forward_fixtures.cpp's bounds.
void expect_reference_logits(const Fixture& f, Plan plan, const latte::Session& s, const std::vector<float>& ref,
                             const std::vector<float>& logits, size_t n_tokens, const char* where) {
  const size_t n_vocab = static_cast<size_t>(s.model().hparams().n_vocab);
  ASSERT_EQ(logits.size(), n_tokens * n_vocab);
  const auto m = latte::testing::compare_logits(ref, logits, n_vocab);
  std::printf("[metrics] %-18s %-8s %-9s nrmse=%.3e mean_kl=%.3e max_kl=%.3e top1=%.3f crossing/token=%zu B\n", f.name,
              plan_name(plan), where, m.nrmse, m.mean_kl, m.max_kl, m.top1,
              s.last_traffic().crossing_bytes / static_cast<size_t>(s.last_traffic().tokens));
  if (f.oracle_nrmse > 0) {  // bounds for quantized files
    EXPECT_LE(m.nrmse, std::max(1.25 * f.oracle_nrmse, 0.005));
    EXPECT_LE(m.mean_kl, std::max(1.5 * f.oracle_kl, 1e-4));
  } else {  // and for exact files with an f32 cache
    EXPECT_LE(m.nrmse, 1e-3);
    EXPECT_LE(m.max_kl, 1e-4);
    EXPECT_EQ(m.top1, 1.0);
  }
}

// A fixture's model, tokens and reference logits, read from ../shared.
struct Loaded {
  latte::Model model;
  std::vector<int32_t> tokens;
  std::vector<float> reference;
};

Loaded load(const Fixture& f) {
  const auto dir = latte::testing::shared_dir();
  return {latte::Model((dir / f.gguf).string()), latte::testing::read_token_file(dir / f.tokens),
          latte::testing::read_f32_file(dir / f.reference)};
}

class OffloadFixture : public ::testing::TestWithParam<Case> {};

TEST_P(OffloadFixture, MatchesReferenceLogitsWithTheDeviceHoldingThePlan) {
  const Fixture& f = kFixtures[GetParam().fixture];
  const Plan plan = GetParam().plan;
  LATTE_REQUIRE_SHARED(f.gguf);
  const Loaded fx = load(f);
  const latte::Model& model = fx.model;
  const std::vector<int32_t>& tokens = fx.tokens;
  const std::vector<float>& ref = fx.reference;

  SimulatedDevice* dev = nullptr;
  latte::SessionOptions o = offloading(request_for(plan, static_cast<int>(model.hparams().n_layer)), &dev);
  o.cache_type = ggl::Type::F32;
  o.n_ctx = static_cast<int64_t>(tokens.size());
  latte::Session s(model, o);
  ASSERT_NE(dev, nullptr);
  expect_device_holds_plan(s, *dev);
  const std::vector<float> logits = eval_for_plan(s, model, tokens, plan);
  EXPECT_GT(dev->graphs, 0);
  expect_reference_logits(f, plan, s, ref, logits, tokens.size(), "simulated");
}

// The same on this machine's GPU where there is one (a CUDA build on a GPU machine, as
// scripts/gpu-check.sh runs it): the session takes its device from the registry, as `latte -ngl`
// does, and the device's own kernels compute what the simulated device computed on the CPU.
class GpuOffloadFixture : public ::testing::TestWithParam<Case> {};

TEST_P(GpuOffloadFixture, MatchesReferenceLogitsOnTheGpu) {
  const ggl::GpuDevices gpus = ggl::gpu_devices();
  if (gpus.devices.empty()) GTEST_SKIP() << "SKIPPED: " << gpus.why_none;
  const Fixture& f = kFixtures[GetParam().fixture];
  const Plan plan = GetParam().plan;
  LATTE_REQUIRE_SHARED(f.gguf);
  const Loaded fx = load(f);
  const latte::Model& model = fx.model;
  const std::vector<int32_t>& tokens = fx.tokens;
  const std::vector<float>& ref = fx.reference;

  latte::SessionOptions o;
  o.n_threads = 1;
  o.placement = request_for(plan, static_cast<int>(model.hparams().n_layer));
  o.cache_type = ggl::Type::F32;
  o.n_ctx = static_cast<int64_t>(tokens.size());
  latte::Session s(model, o);
  ASSERT_NE(s.offload(), nullptr) << "the session did not offload";
  const std::vector<float> logits = eval_for_plan(s, model, tokens, plan);
  expect_reference_logits(f, plan, s, ref, logits, tokens.size(), "gpu");
}

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (int i = 0; i < static_cast<int>(std::size(kFixtures)); ++i)
    for (Plan p : {Plan::kAll, Plan::kCpuMoe, Plan::kHalf}) out.push_back({i, p});
  return out;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string s = std::string(kFixtures[info.param.fixture].name) + "_" + plan_name(info.param.plan);
  for (char& c : s)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, OffloadFixture, ::testing::ValuesIn(all_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Fixtures, GpuOffloadFixture, ::testing::ValuesIn(all_cases()), case_name);

const char* kTiny = "fixtures/ds2-v2-tiny-f32.gguf";

std::vector<int32_t> some_tokens(size_t n) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 37 + 11) % 200);
  return t;
}

// A device without an op keeps the tensors read by it on the CPU; the rest still offloads.
TEST(OffloadSession, TensorsTheDeviceCannotRunStayOnTheCpu) {
  LATTE_REQUIRE_SHARED(kTiny);
  const latte::Model model((latte::testing::shared_dir() / kTiny).string());
  std::set<ggl::Op> ops = latte::testing::all_ops();
  ops.erase(ggl::Op::kMulMatId);
  SimulatedDevice* dev = nullptr;
  latte::Session s(model, offloading(request_for(Plan::kAll, 2), &dev, ops));
  ASSERT_NE(s.offload(), nullptr);
  EXPECT_FALSE(s.offload()->kept_on_cpu.empty());
  for (const std::string& name : s.offload()->kept_on_cpu) EXPECT_NE(name.find("_exps"), std::string::npos) << name;
  expect_device_holds_plan(s, *dev);
  latte::SessionOptions cpu_only;
  cpu_only.n_threads = 1;
  latte::Session cpu(model, cpu_only);
  const auto tokens = some_tokens(12);
  const auto got = s.eval(tokens), want = cpu.eval(tokens);
  EXPECT_LE(latte::testing::compare_logits(want, got, static_cast<size_t>(model.hparams().n_vocab)).nrmse, 1e-5);
}

// -ot rules applied last: a layer whose cache stays on the CPU while its attention weights go to
// the device, and a layer's attention output projection kept on the CPU.
TEST(OffloadSession, OverridesSplitALayerBetweenDeviceAndCpu) {
  for (const char* gguf : {kTiny, "fixtures/llama-gqa-tiny-f32.gguf"}) {
    LATTE_REQUIRE_SHARED(gguf);
    const latte::Model model((latte::testing::shared_dir() / gguf).string());
    latte::PlacementRequest r = request_for(Plan::kAll, 2);
    for (const char* rule : {"^cache\\.0$", "blk\\.1\\.attn_output"})
      r.overrides.push_back({rule, std::regex(rule), latte::Device::kCpu});
    SimulatedDevice* dev = nullptr;
    latte::Session s(model, offloading(r, &dev));
    expect_device_holds_plan(s, *dev);
    EXPECT_EQ(s.cache().device(0), nullptr) << gguf;
    EXPECT_NE(s.cache().device(1), nullptr) << gguf;
    EXPECT_FALSE(dev->holds(s.weights().layers[1].wo->data)) << gguf;
    EXPECT_TRUE(dev->holds(s.weights().layers[0].wo->data)) << gguf;
    latte::SessionOptions oc;
    oc.n_threads = 1;
    latte::Session cpu(model, oc);
    const auto tokens = some_tokens(12);
    const std::span<const int32_t> all(tokens);
    auto got = s.eval(all.first(8)), want = cpu.eval(all.first(8));
    for (size_t i = 8; i < tokens.size(); ++i) {
      const auto a = s.eval(all.subspan(i, 1)), b = cpu.eval(all.subspan(i, 1));
      got.insert(got.end(), a.begin(), a.end());
      want.insert(want.end(), b.begin(), b.end());
    }
    EXPECT_LE(latte::testing::compare_logits(want, got, static_cast<size_t>(model.hparams().n_vocab)).nrmse, 1e-5)
        << gguf;
  }
}

TEST(OffloadSession, NoDeviceRunsOnTheCpu) {
  LATTE_REQUIRE_SHARED(kTiny);
  const latte::Model model((latte::testing::shared_dir() / kTiny).string());
  latte::SessionOptions o;
  o.placement = request_for(Plan::kAll, 2);
  o.devices = [] { return std::vector<std::unique_ptr<ggl::Backend>>{}; };
  latte::Session s(model, o);
  EXPECT_EQ(s.offload(), nullptr);
  EXPECT_EQ(s.device(), nullptr);
  EXPECT_EQ(s.backend().name(), "cpu");
}

// Saving a device-held cache downloads it, loading uploads it: the resumed session continues as
// the original does, and its file is the one a CPU session reads.
TEST(OffloadSession, CacheSaveAndLoadThroughTheDevice) {
  LATTE_REQUIRE_SHARED(kTiny);
  const latte::Model model((latte::testing::shared_dir() / kTiny).string());
  const auto tokens = some_tokens(10);
  const std::span<const int32_t> prompt(tokens.data(), 9), next(tokens.data() + 9, 1);
  const std::string path = (std::filesystem::temp_directory_path() / "latte_offload_cache.bin").string();

  SimulatedDevice *a_dev = nullptr, *b_dev = nullptr;
  latte::SessionOptions oa = offloading(request_for(Plan::kAll, 2), &a_dev);
  oa.mla_mode = latte::MlaMode::kAbsorb;
  latte::Session a(model, oa);
  a.eval(prompt);
  const size_t before = a_dev->downloaded;
  latte::save_cache(a, prompt, path);
  EXPECT_GE(a_dev->downloaded - before, a.cache().bytes_per_token() * prompt.size());

  latte::SessionOptions ob = offloading(request_for(Plan::kAll, 2), &b_dev);
  ob.mla_mode = latte::MlaMode::kAbsorb;
  latte::Session b(model, ob);
  const size_t uploaded = b_dev->uploaded;
  latte::load_cache(b, prompt, path);
  EXPECT_GE(b_dev->uploaded - uploaded, b.cache().bytes_per_token() * prompt.size());
  EXPECT_EQ(b.eval(next), a.eval(next));

  latte::SessionOptions oc;
  oc.n_threads = 1;
  oc.mla_mode = latte::MlaMode::kAbsorb;
  latte::Session cpu(model, oc);
  latte::load_cache(cpu, prompt, path);
  const auto want = cpu.eval(next);
  latte::Session fresh(model, oc);
  fresh.eval(prompt);
  EXPECT_EQ(want, fresh.eval(next)) << "the device session's file differs from the CPU's";
  std::remove(path.c_str());
}

// A context shift on a device-held cache: rows moved and re-rotated there give what the CPU gives.
TEST(OffloadSession, CacheShiftOnTheDevice) {
  for (const char* gguf : {kTiny, "fixtures/llama-gqa-tiny-f32.gguf"}) {
    LATTE_REQUIRE_SHARED(gguf);
    const latte::Model model((latte::testing::shared_dir() / gguf).string());
    const auto tokens = some_tokens(13);
    const std::span<const int32_t> prompt(tokens.data(), 12), next(tokens.data() + 12, 1);
    SimulatedDevice* dev = nullptr;
    latte::SessionOptions o = offloading(request_for(Plan::kAll, 2), &dev);
    o.mla_mode = latte::MlaMode::kAbsorb;
    latte::Session s(model, o);
    latte::SessionOptions oc;
    oc.n_threads = 1;
    oc.mla_mode = latte::MlaMode::kAbsorb;
    latte::Session cpu(model, oc);
    s.eval(prompt);
    cpu.eval(prompt);
    const int graphs = dev->graphs;
    latte::remove_cached_tokens(s, 2, 6);
    latte::remove_cached_tokens(cpu, 2, 6);
    EXPECT_GT(dev->graphs, graphs) << gguf << ": the rotation did not run on the device";
    EXPECT_EQ(s.n_past(), 8);
    const auto got = s.eval(next), want = cpu.eval(next);
    EXPECT_LE(latte::testing::compare_logits(want, got, static_cast<size_t>(model.hparams().n_vocab)).nrmse, 1e-5)
        << gguf;
  }
}

// Expert products of a long prompt whose experts stay on the CPU run on the device with the used
// experts copied over; the results equal those without the copy.
TEST(OffloadSession, ExpertsCopiedForLongPrompts) {
  LATTE_REQUIRE_SHARED(kTiny);
  const latte::Model model((latte::testing::shared_dir() / kTiny).string());
  const auto tokens = some_tokens(24);
  auto run = [&](bool op_offload, size_t* expert_bytes, size_t* uploaded, int* expert_nodes) {
    SimulatedDevice* dev = nullptr;
    latte::SessionOptions o = offloading(request_for(Plan::kCpuMoe, 2), &dev);
    o.op_offload = op_offload;
    o.op_offload_min_batch = 4;  // 4 * 6 experts / 2 used: from 12 tokens
    latte::Session s(model, o);
    const size_t at_load = dev->uploaded;
    auto logits = s.eval(tokens);
    *expert_bytes = s.last_traffic().expert_bytes;
    *uploaded = dev->uploaded - at_load;
    *expert_nodes = dev->ran[ggl::Op::kMulMatId];
    return logits;
  };
  size_t with_bytes = 0, with_up = 0, without_bytes = 0, without_up = 0;
  int with_nodes = 0, without_nodes = 0;
  const auto with = run(true, &with_bytes, &with_up, &with_nodes);
  const auto without = run(false, &without_bytes, &without_up, &without_nodes);
  // The device refuses leaves outside its memory: equal results mean it computed on the copies.
  EXPECT_EQ(with, without);
  EXPECT_EQ(without_bytes, 0u);
  EXPECT_EQ(without_nodes, 0);
  int moe_layers = 0;
  for (const latte::LayerWeights& l : model.weights().layers) moe_layers += l.is_moe();
  EXPECT_EQ(with_nodes, 3 * moe_layers) << "gate, up and down of each MoE layer";
  EXPECT_GT(with_bytes, 0u);
  EXPECT_GE(with_up, with_bytes) << "the device did not receive the experts' bytes";
  size_t all_experts = 0;
  for (const latte::LayerWeights& l : model.weights().layers)
    if (l.ffn_gate_exps)
      for (const auto* w : {l.ffn_gate_exps, l.ffn_up_exps, l.ffn_down_exps}) all_experts += w->nbytes;
  EXPECT_LE(with_bytes, all_experts);
}

}  // namespace test_offload_session
