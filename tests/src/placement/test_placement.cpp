// The placement planner (src/placement/): tensor roles from names, the flags' meanings (-ngl,
// --cpu-moe, --n-cpu-moe, --gpu-budget, -ot) on a real shared model's tensor list and on the
// full DeepSeek-V2-Lite and V3 tensor lists (src/synth presets, Q4_0 matrices), byte sizes.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "ggml-like/core/types.h"
#include "ggml-like/gguf/gguf.h"
#include "src/model/cache_footprint.h"
#include "src/placement/byte_size.h"
#include "src/placement/placement.h"
#include "src/placement/plan_table.h"
#include "src/placement/tensor_roles.h"
#include "src/synth/synth_plan.h"
#include "tests/support/test_support.h"

namespace test_placement {

using latte::Device;
using latte::PlacementRequest;
using latte::PlanTensor;
using latte::TensorRole;

TEST(Placement, RolesFromNames) {
  struct Case {
    const char* name;
    int layer;
    TensorRole role;
  };
  const Case cases[] = {
      {"token_embd.weight", -1, TensorRole::kEmbedding},
      {"output.weight", -1, TensorRole::kOutputHead},
      {"output_norm.weight", -1, TensorRole::kOutputHead},
      {"rope_freqs.weight", -1, TensorRole::kOther},
      {"blk.0.attn_norm.weight", 0, TensorRole::kAttention},
      {"blk.3.attn_q_a.weight", 3, TensorRole::kAttention},
      {"blk.3.attn_kv_a_mqa.weight", 3, TensorRole::kAttention},
      {"blk.12.attn_k_b.weight", 12, TensorRole::kAttention},
      {"blk.12.attn_output.weight", 12, TensorRole::kAttention},
      {"blk.0.ffn_gate.weight", 0, TensorRole::kDenseFfn},
      {"blk.0.ffn_norm.weight", 0, TensorRole::kDenseFfn},
      {"blk.60.ffn_gate_inp.weight", 60, TensorRole::kRouter},
      {"blk.60.exp_probs_b.bias", 60, TensorRole::kRouter},
      {"blk.60.ffn_down_exps.weight", 60, TensorRole::kRoutedExperts},
      {"blk.60.ffn_up_shexp.weight", 60, TensorRole::kSharedExpert},
      {"blk.x.attn_q.weight", -1, TensorRole::kOther},
      {"blk.7", -1, TensorRole::kOther},
  };
  for (const Case& c : cases) {
    const PlanTensor t = latte::classify_tensor(c.name, 10);
    EXPECT_EQ(t.layer, c.layer) << c.name;
    EXPECT_EQ(t.role, c.role) << c.name;
  }
}

// The tensor list of a synthetic model: matrices in Q4_0, vectors in F32 (as `latte synth`
// writes them), plus the F16 latent cache at n_ctx.
struct ModelList {
  std::vector<PlanTensor> tensors;
  latte::Hparams hp;
  int n_layer = 0;
};

ModelList synth_list(const char* preset, int64_t n_ctx) {
  const latte::synth::Geometry g = latte::synth::preset(preset);
  ModelList m;
  std::vector<ggl::TensorInfo> infos;
  for (const latte::synth::SynthTensor& t : latte::synth::plan_tensors(g, latte::convert::MlaLayout::KbVb)) {
    ggl::TensorInfo info;
    info.name = t.name;
    const ggl::Type type = t.ne.size() == 1 ? ggl::Type::F32 : ggl::Type::Q4_0;
    info.nbytes = ggl::row_bytes(type, t.ne[0]) * static_cast<size_t>(t.rows());
    infos.push_back(info);
  }
  m.n_layer = static_cast<int>(g.n_layer);
  const size_t cache_per_layer = static_cast<size_t>(g.kv_lora_rank + g.qk_rope) * 2 * static_cast<size_t>(n_ctx);
  m.tensors = latte::classify_tensors(infos, g.n_layer, cache_per_layer);
  m.hp.arch = latte::Arch::kDeepseek2;
  m.hp.n_embd = g.n_embd;
  m.hp.n_layer = g.n_layer;
  m.hp.n_head = g.n_head;
  m.hp.n_vocab = g.n_vocab;
  m.hp.n_ff = g.n_ff;
  m.hp.head_dim_k = g.qk_nope + g.qk_rope;
  m.hp.head_dim_v = g.v_head_dim;
  m.hp.mla = {g.q_lora_rank, g.kv_lora_rank, g.qk_nope, g.qk_rope, g.v_head_dim};
  m.hp.moe.n_expert = g.n_expert;
  m.hp.moe.n_expert_used = g.n_expert_used;
  m.hp.moe.n_expert_shared = g.n_expert_shared;
  m.hp.moe.n_ff_exp = g.n_ff_exp;
  return m;
}

size_t total_bytes(const std::vector<PlanTensor>& ts, TensorRole r) {
  size_t n = 0;
  for (const PlanTensor& t : ts)
    if (t.role == r) n += t.bytes;
  return n;
}

size_t all_bytes(const std::vector<PlanTensor>& ts) {
  size_t n = 0;
  for (const PlanTensor& t : ts) n += t.bytes;
  return n;
}

PlacementRequest ngl(int n) {
  PlacementRequest r;
  r.gpu_layers = n;
  return r;
}

latte::TensorOverride ot(const char* re, Device d) { return {re, std::regex(re), d}; }

TEST(Placement, EveryTensorOfAnMlaModelHasARole) {
  for (const char* preset : {"v2-lite", "v3"}) {
    const ModelList m = synth_list(preset, 4096);
    for (const PlanTensor& t : m.tensors) EXPECT_NE(t.role, TensorRole::kOther) << preset << ": " << t.name;
    // MoE layers give their ffn_norm to the shared experts; V2-Lite has one leading dense layer,
    // V3 three.
    int dense_norms = 0;
    for (const PlanTensor& t : m.tensors)
      if (t.name.find("ffn_norm") != std::string::npos && t.role == TensorRole::kDenseFfn) ++dense_norms;
    EXPECT_EQ(dense_norms, std::string(preset) == "v3" ? 3 : 1) << preset;
  }
}

TEST(Placement, GpuLayersCountsFromTheLastLayer) {
  const ModelList m = synth_list("v2-lite", 4096);
  const size_t work = latte::gpu_work_bytes(m.hp, 512, 4096);
  struct Case {
    int ngl;
    int attention_layers;
    bool head;
  };
  for (const Case c : {Case{0, 0, false}, Case{1, 1, false}, Case{13, 13, false}, Case{27, 27, false},
                       Case{28, 27, true}, Case{99, 27, true}}) {
    const latte::Placement p = latte::plan_placement(m.tensors, m.n_layer, ngl(c.ngl), work);
    EXPECT_EQ(p.gpu_layers_with(TensorRole::kAttention), c.attention_layers) << "-ngl " << c.ngl;
    EXPECT_EQ(p.gpu_layers_with(TensorRole::kCache), c.attention_layers) << "-ngl " << c.ngl;
    EXPECT_EQ(p.bytes(Device::kGpu, TensorRole::kOutputHead) > 0, c.head) << "-ngl " << c.ngl;
    EXPECT_EQ(p.work_bytes, c.ngl > 0 ? work : 0) << "-ngl " << c.ngl;
    for (const latte::PlacedTensor& t : p.tensors) {
      if (t.tensor.layer >= 0) {
        EXPECT_EQ(t.device == Device::kGpu, t.tensor.layer >= m.n_layer - c.ngl) << t.tensor.name << " -ngl " << c.ngl;
      }
      if (t.tensor.role == TensorRole::kEmbedding) {
        EXPECT_EQ(t.device, Device::kCpu);
      }
    }
  }
  // -ngl 99 holds everything but the token embedding.
  const latte::Placement all = latte::plan_placement(m.tensors, m.n_layer, ngl(99), work);
  EXPECT_EQ(all.bytes(Device::kCpu), total_bytes(m.tensors, TensorRole::kEmbedding));
}

TEST(Placement, CpuMoeKeepsRoutedExpertsOnTheCpu) {
  for (const char* preset : {"v2-lite", "v3"}) {
    const ModelList m = synth_list(preset, 4096);
    PlacementRequest r = ngl(99);
    r.cpu_moe = true;
    const latte::Placement p = latte::plan_placement(m.tensors, m.n_layer, r, 0);
    EXPECT_EQ(p.bytes(Device::kGpu, TensorRole::kRoutedExperts), 0u) << preset;
    EXPECT_EQ(p.bytes(Device::kCpu),
              total_bytes(m.tensors, TensorRole::kRoutedExperts) + total_bytes(m.tensors, TensorRole::kEmbedding))
        << preset;
    EXPECT_EQ(p.gpu_layers_with(TensorRole::kSharedExpert), p.layers_with(TensorRole::kSharedExpert)) << preset;

    // -ot exps=cpu is the same plan.
    PlacementRequest o = ngl(99);
    o.overrides.push_back(ot("exps", Device::kCpu));
    const latte::Placement q = latte::plan_placement(m.tensors, m.n_layer, o, 0);
    for (size_t i = 0; i < p.tensors.size(); ++i) EXPECT_EQ(p.tensors[i].device, q.tensors[i].device);

    // --n-cpu-moe 10: the first ten layers' experts stay.
    PlacementRequest n = ngl(99);
    n.n_cpu_moe = 10;
    const latte::Placement s = latte::plan_placement(m.tensors, m.n_layer, n, 0);
    for (const latte::PlacedTensor& t : s.tensors)
      if (t.tensor.role == TensorRole::kRoutedExperts) {
        EXPECT_EQ(t.device == Device::kGpu, t.tensor.layer >= 10) << preset << ": " << t.tensor.name;
      }
    const int dense = std::string(preset) == "v3" ? 3 : 1;  // leading dense layers: no experts
    EXPECT_EQ(s.gpu_layers_with(TensorRole::kRoutedExperts), p.layers_with(TensorRole::kRoutedExperts) - (10 - dense));
  }
}

// The budget fills by benefit per byte: all attention (with caches) first, then the dense and
// shared FFNs, the output head, routed experts last; never past the budget.
TEST(Placement, BudgetFillsInOrderOfBenefit) {
  const ModelList m = synth_list("v2-lite", 4096);
  const size_t work = latte::gpu_work_bytes(m.hp, 512, 4096);
  const size_t attention = total_bytes(m.tensors, TensorRole::kAttention) + total_bytes(m.tensors, TensorRole::kCache);
  const size_t ffn = total_bytes(m.tensors, TensorRole::kDenseFfn) + total_bytes(m.tensors, TensorRole::kSharedExpert) +
                     total_bytes(m.tensors, TensorRole::kRouter);
  const size_t head = total_bytes(m.tensors, TensorRole::kOutputHead);
  const size_t experts = total_bytes(m.tensors, TensorRole::kRoutedExperts);
  const size_t layer_experts = experts / 26;  // 26 MoE layers of equal size

  struct Case {
    size_t budget;
    size_t gpu_weights;  // bytes the plan must put on the GPU (work buffers excluded)
  };
  const Case cases[] = {
      {work / 2, 0},                              // not even the work buffers fit
      {work + attention, attention},              // exactly the attention
      {work + attention + ffn, attention + ffn},  // and the FFNs
      {work + attention + ffn + head, attention + ffn + head},
      {work + attention + ffn + head + 3 * layer_experts + 1000, attention + ffn + head + 3 * layer_experts},
      {work + attention + ffn + head + experts, attention + ffn + head + experts},  // everything
  };
  for (const Case& c : cases) {
    PlacementRequest r;
    r.budget = c.budget;
    const latte::Placement p = latte::plan_placement(m.tensors, m.n_layer, r, work);
    EXPECT_EQ(p.bytes(Device::kGpu), c.gpu_weights) << "budget " << c.budget;
    EXPECT_LE(p.gpu_total(), c.budget);
  }
  // Three layers of experts: the last three.
  PlacementRequest r;
  r.budget = work + attention + ffn + head + 3 * layer_experts + 1000;
  const latte::Placement p = latte::plan_placement(m.tensors, m.n_layer, r, work);
  for (const latte::PlacedTensor& t : p.tensors)
    if (t.tensor.role == TensorRole::kRoutedExperts) {
      EXPECT_EQ(t.device == Device::kGpu, t.tensor.layer >= 24) << t.tensor.name;
    }

  // A budget between whole layers of attention: whole layers only, from the last.
  r.budget = work + attention / 2;
  const latte::Placement half = latte::plan_placement(m.tensors, m.n_layer, r, work);
  EXPECT_EQ(half.gpu_layers_with(TensorRole::kAttention), half.gpu_layers_with(TensorRole::kCache));
  EXPECT_GT(half.gpu_layers_with(TensorRole::kAttention), 0);
  EXPECT_LT(half.gpu_layers_with(TensorRole::kAttention), 27);
  const int k = half.gpu_layers_with(TensorRole::kAttention);
  for (const latte::PlacedTensor& t : half.tensors) {
    if (t.tensor.role == TensorRole::kAttention) {
      EXPECT_EQ(t.device == Device::kGpu, t.tensor.layer >= 27 - k) << t.tensor.name;
    }
    if (t.tensor.role == TensorRole::kRoutedExperts || t.tensor.role == TensorRole::kOutputHead) {
      EXPECT_EQ(t.device, Device::kCpu) << t.tensor.name;
    }
  }

  // With -ngl the budget only fills the last N layers.
  PlacementRequest both = ngl(5);
  both.budget = SIZE_MAX / 2;
  const latte::Placement five = latte::plan_placement(m.tensors, m.n_layer, both, work);
  EXPECT_EQ(five.gpu_layers_with(TensorRole::kAttention), 5);
  EXPECT_EQ(five.bytes(Device::kGpu, TensorRole::kOutputHead), 0u);
}

TEST(Placement, OverridesComeLastAndTheFirstMatchWins) {
  const ModelList m = synth_list("v2-lite", 1024);
  PlacementRequest r = ngl(0);
  r.overrides = {ot("blk\\.0\\.", Device::kCpu), ot("attn_kv_b|attn_k_b", Device::kGpu),
                 ot("cache\\.3$", Device::kGpu)};
  const latte::Placement p = latte::plan_placement(m.tensors, m.n_layer, r, 1000);
  std::map<std::string, Device> where;
  for (const latte::PlacedTensor& t : p.tensors) where[t.tensor.name] = t.device;
  EXPECT_EQ(where.at("blk.0.attn_k_b.weight"), Device::kCpu);  // blk.0. matched first
  EXPECT_EQ(where.at("blk.1.attn_k_b.weight"), Device::kGpu);
  EXPECT_EQ(where.at("blk.1.attn_q.weight"), Device::kCpu);
  EXPECT_EQ(where.at("cache.3"), Device::kGpu);
  EXPECT_EQ(where.at("cache.13"), Device::kCpu);
  EXPECT_EQ(p.work_bytes, 1000u) << "something is on the GPU, so the work buffers are";
  // A budget the overrides exceed is reported, not silently honoured.
  r.budget = 10;
  const latte::Placement over = latte::plan_placement(m.tensors, m.n_layer, r, 1000);
  EXPECT_GT(over.gpu_total(), 10u);
  EXPECT_NE(latte::plan_table(over, true).find("over it by"), std::string::npos);
}

TEST(Placement, RealModelTensorList) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-lite-27l-q8_0.gguf");
  const auto path = latte::testing::shared_dir() / "fixtures/ds2-lite-27l-q8_0.gguf";
  const ggl::GgufFile file(path.string());
  const latte::KvCacheFootprint f = latte::kv_cache_footprint(file, ggl::Type::F16);
  const int64_t ctx = 2048;
  const auto tensors = latte::classify_tensors(file.tensors(), f.hparams.n_layer, f.bytes_per_token_and_layer() * ctx);
  size_t file_bytes = 0;
  for (const ggl::TensorInfo& t : file.tensors()) file_bytes += t.nbytes;
  EXPECT_EQ(all_bytes(tensors), file_bytes + f.bytes_per_token * ctx);
  for (const PlanTensor& t : tensors) EXPECT_NE(t.role, TensorRole::kOther) << t.name;

  PlacementRequest r = ngl(99);
  r.cpu_moe = true;
  const latte::Placement p = latte::plan_placement(tensors, 27, r, latte::gpu_work_bytes(f.hparams, 512, ctx));
  const std::string table = latte::plan_table(p, true);
  // One row per layer, the summary line last.
  EXPECT_NE(table.find("\n   26  gpu"), std::string::npos) << table;
  EXPECT_NE(table.find("offload: gpu "), std::string::npos);
  EXPECT_NE(table.find("attention 27/27 layers, dense ffn 1/1, shared experts 26/26, routed experts 0/26, "
                       "output head gpu"),
            std::string::npos)
      << table;
}

TEST(Placement, WorkBuffers) {
  latte::Hparams hp;
  hp.arch = latte::Arch::kDeepseek2;
  hp.n_embd = 10;
  hp.n_ff = 30;
  hp.n_head = 2;
  hp.head_dim_k = 6;
  hp.head_dim_v = 4;
  hp.n_vocab = 100;
  hp.mla = {0, 8, 4, 2, 4};
  hp.moe.n_ff_exp = 5;
  hp.moe.n_expert_used = 6;
  hp.moe.n_expert_shared = 2;  // 5 * 8 = 40 > 30
  // Per token 4*10 + 3*40 + 2*(6+4) + 100 = 280 floats; the expanded context 64 * 2 * (4 + 4).
  EXPECT_EQ(latte::gpu_work_bytes(hp, 3, 64), (280 * 3 + 64 * 2 * 8) * sizeof(float));
  hp.arch = latte::Arch::kLlama;
  EXPECT_EQ(latte::gpu_work_bytes(hp, 3, 64), 280 * 3 * sizeof(float));
}

TEST(Placement, ByteSizes) {
  EXPECT_EQ(latte::parse_byte_size("12G"), size_t{12} << 30);
  EXPECT_EQ(latte::parse_byte_size("512M"), size_t{512} << 20);
  EXPECT_EQ(latte::parse_byte_size("1.5GiB"), size_t{3} << 29);
  EXPECT_EQ(latte::parse_byte_size("64kb"), size_t{64} << 10);
  EXPECT_EQ(latte::parse_byte_size("1000"), size_t{1000});
  EXPECT_EQ(latte::parse_byte_size("2T"), size_t{2} << 40);
  for (const char* bad : {"", "G", "-1G", "12X", "12GG", "1e3", "99999999999T"})
    EXPECT_FALSE(latte::parse_byte_size(bad).has_value()) << bad;
  EXPECT_EQ(latte::format_bytes(812), "812 B");
  EXPECT_EQ(latte::format_bytes(3.0 * (1 << 29)), "1.50 GiB");
}

}  // namespace test_placement
