// DeepSeek's routed experts (moe_ffn) against an independent scalar reference: sigmoid or softmax
// scores, the exp_probs_b selection bias, group-limited selection (DeepSeek-V3: 8 groups of 32
// experts, the 4 groups with the largest sum of their two best biased scores), top-k among the
// kept groups, normalised and scaled weights, and up to 384 experts (Kimi-K2).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/graph/graph.h"
#include "src/model/graph_blocks.h"

namespace test_moe_routing {

struct Case {
  int n_expert, n_groups, n_groups_used, k;
  latte::ExpertGating gating;
  bool bias;
};

struct MoeLayer {
  int D = 16, F = 8, E = 0;
  std::vector<float> inp, bias, gate, up, down;
  ggl::TensorInfo t_inp, t_bias, t_gate, t_up, t_down;
  latte::LayerWeights l;
};

ggl::TensorInfo info(const char* name, std::vector<float>& v, std::vector<int64_t> ne) {
  ggl::TensorInfo t;
  t.name = name;
  t.type = ggl::Type::F32;
  t.n_dims = static_cast<int>(ne.size());
  for (size_t i = 0; i < ne.size(); ++i) t.ne[i] = ne[i];
  t.nbytes = v.size() * sizeof(float);
  t.data = reinterpret_cast<const uint8_t*>(v.data());
  return t;
}

std::unique_ptr<MoeLayer> make_layer(int E, bool bias, uint32_t seed) {
  auto m = std::make_unique<MoeLayer>();
  m->E = E;
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  auto fill = [&](std::vector<float>& v, size_t size, float scale) {
    v.resize(size);
    for (float& x : v) x = scale * n(rng);
  };
  fill(m->inp, static_cast<size_t>(m->D * E), 0.5f);
  fill(m->bias, static_cast<size_t>(E), 0.3f);
  fill(m->gate, static_cast<size_t>(m->D * m->F * E), 0.3f);
  fill(m->up, static_cast<size_t>(m->D * m->F * E), 0.3f);
  fill(m->down, static_cast<size_t>(m->F * m->D * E), 0.3f);
  m->t_inp = info("ffn_gate_inp", m->inp, {m->D, E});
  m->t_bias = info("exp_probs_b", m->bias, {E});
  m->t_gate = info("ffn_gate_exps", m->gate, {m->D, m->F, E});
  m->t_up = info("ffn_up_exps", m->up, {m->D, m->F, E});
  m->t_down = info("ffn_down_exps", m->down, {m->F, m->D, E});
  m->l.ffn_gate_inp = &m->t_inp;
  m->l.exp_probs_b = bias ? &m->t_bias : nullptr;
  m->l.ffn_gate_exps = &m->t_gate;
  m->l.ffn_up_exps = &m->t_up;
  m->l.ffn_down_exps = &m->t_down;
  return m;
}

// The reference's expert choice for one token, from plain loops. group_score_top2 = false scores
// a group by the sum of all its members instead (what the test must be able to tell apart).
std::vector<int> choose_experts(const std::vector<double>& sel, const Case& c, bool group_score_top2 = true) {
  const int per = c.n_expert / c.n_groups;
  std::vector<std::pair<double, int>> groups;
  for (int g = 0; g < c.n_groups; ++g) {
    std::vector<double> v(sel.begin() + g * per, sel.begin() + (g + 1) * per);
    std::sort(v.rbegin(), v.rend());
    double score = 0;
    if (group_score_top2)
      score = per > 1 ? v[0] + v[1] : v[0];
    else
      for (double x : v) score += x;
    groups.push_back({-score, g});  // ascending: best first, ties to the lower group
  }
  std::sort(groups.begin(), groups.end());
  std::vector<std::pair<double, int>> cand;
  for (int i = 0; i < c.n_groups_used; ++i)
    for (int j = 0; j < per; ++j) {
      const int e = groups[i].second * per + j;
      cand.push_back({-sel[e], e});
    }
  std::sort(cand.begin(), cand.end());
  std::vector<int> out;
  for (int i = 0; i < c.k; ++i) out.push_back(cand[i].second);
  return out;
}

// The router's scores of one token (softmax or sigmoid) and the selection scores (plus the bias).
void scores(const MoeLayer& m, const float* x, const Case& c, std::vector<double>& probs, std::vector<double>& sel) {
  std::vector<double> logits(m.E);
  probs.assign(m.E, 0.0);
  sel.assign(m.E, 0.0);
  for (int e = 0; e < m.E; ++e) {
    double s = 0;
    for (int d = 0; d < m.D; ++d) s += static_cast<double>(m.inp[e * m.D + d]) * x[d];
    logits[e] = s;
  }
  if (c.gating == latte::ExpertGating::kSigmoid) {
    for (int e = 0; e < m.E; ++e) probs[e] = 1.0 / (1.0 + std::exp(-logits[e]));
  } else {
    const double mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (int e = 0; e < m.E; ++e) sum += probs[e] = std::exp(logits[e] - mx);
    for (double& p : probs) p /= sum;
  }
  for (int e = 0; e < m.E; ++e) sel[e] = probs[e] + (c.bias ? m.bias[e] : 0.0);
}

// moe_ffn's output for one token, computed directly.
std::vector<double> reference(const MoeLayer& m, const float* x, const latte::MoeConfig& moe, const Case& c,
                              std::vector<int>* chosen) {
  std::vector<double> probs, sel;
  scores(m, x, c, probs, sel);
  *chosen = choose_experts(sel, c);
  double wsum = 0;
  for (int e : *chosen) wsum += probs[e];
  std::vector<double> out(m.D, 0.0);
  for (int e : *chosen) {
    const double w = (moe.weights_norm ? probs[e] / wsum : probs[e]) * moe.weights_scale;
    std::vector<double> act(m.F);
    for (int f = 0; f < m.F; ++f) {
      double g = 0, u = 0;
      for (int d = 0; d < m.D; ++d) {
        g += static_cast<double>(m.gate[(e * m.F + f) * m.D + d]) * x[d];
        u += static_cast<double>(m.up[(e * m.F + f) * m.D + d]) * x[d];
      }
      act[f] = g / (1.0 + std::exp(-g)) * u;
    }
    for (int d = 0; d < m.D; ++d) {
      double s = 0;
      for (int f = 0; f < m.F; ++f) s += static_cast<double>(m.down[(e * m.D + d) * m.F + f]) * act[f];
      out[d] += w * s;
    }
  }
  return out;
}

class MoeRouting : public ::testing::TestWithParam<Case> {};

TEST_P(MoeRouting, MatchesTheScalarReference) {
  const Case c = GetParam();
  const auto m = make_layer(c.n_expert, c.bias, 11 + c.n_expert);
  latte::MoeConfig moe;
  moe.n_expert = c.n_expert;
  moe.n_expert_used = c.k;
  moe.gating = c.gating;
  moe.weights_norm = true;
  moe.weights_scale = 2.5f;
  moe.n_groups = c.n_groups;
  moe.n_groups_used = c.n_groups_used;

  const int T = 48;
  std::vector<float> x(static_cast<size_t>(m->D * T));
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 1.5f);
  for (float& v : x) v = n(rng);

  ggl::Graph g;
  ggl::Tensor* xt = g.external(ggl::Type::F32, std::vector<int64_t>{m->D, T}, x.data(), "x");
  ggl::Tensor* out = latte::moe_ffn(g, xt, m->l, moe);
  g.mark_output(out);
  ggl::CpuBackend backend(2);
  backend.compute(g);
  ASSERT_TRUE(out->is_contiguous());
  const auto* got = reinterpret_cast<const float*>(out->data);

  int differs_from_sum_of_all = 0;
  for (int t = 0; t < T; ++t) {
    std::vector<int> chosen;
    const std::vector<double> want = reference(*m, x.data() + t * m->D, moe, c, &chosen);
    for (int d = 0; d < m->D; ++d)
      ASSERT_NEAR(got[t * m->D + d], want[d], 2e-4 * (1.0 + std::fabs(want[d]))) << "token " << t << " dim " << d;
    // Would scoring groups by the sum of all members have chosen other experts for this token?
    if (c.n_groups > 1 && c.n_groups_used < c.n_groups) {
      std::vector<double> probs, sel;
      scores(*m, x.data() + t * m->D, c, probs, sel);
      std::vector<int> a = choose_experts(sel, c, true), b = choose_experts(sel, c, false);
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      differs_from_sum_of_all += a != b;
    }
  }
  // The data must be able to catch a "sum of all members" group score.
  if (c.n_groups > 1 && c.n_groups_used < c.n_groups) {
    EXPECT_GT(differs_from_sum_of_all, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Configs, MoeRouting,
    ::testing::Values(Case{256, 8, 4, 8, latte::ExpertGating::kSigmoid, true},   // DeepSeek-V3
                      Case{64, 8, 3, 6, latte::ExpertGating::kSoftmax, false},   // V2-style groups of 8
                      Case{160, 8, 3, 6, latte::ExpertGating::kSoftmax, false},  // DeepSeek-V2 (236B)
                      Case{384, 1, 1, 8, latte::ExpertGating::kSigmoid, true},   // Kimi-K2
                      Case{64, 1, 1, 6, latte::ExpertGating::kSoftmax, false}),  // V2-Lite
    [](const auto& info) {
      const Case& c = info.param;
      return std::string("e") + std::to_string(c.n_expert) + "_g" + std::to_string(c.n_groups) + "_u" +
             std::to_string(c.n_groups_used) + "_k" + std::to_string(c.k);
    });

// Which products may take 8-bit activations (ggl::ActivationPrecision): a MoE layer's routed and
// shared experts, and nothing else a layer builds (the dense SwiGLU feed-forward keeps kFine);
// docs/cpu-kernels.md, "Which precision each product uses", has the measurements behind the rule.
TEST(MoeRouting, OnlyTheExpertsAllowCoarseActivations) {
  auto m = make_layer(8, false, 3);
  std::vector<float> shexp_gate(static_cast<size_t>(m->D * m->F)), shexp_up(shexp_gate.size()),
      shexp_down(shexp_gate.size());
  const ggl::TensorInfo gate = info("ffn_gate_shexp", shexp_gate, {m->D, m->F}),
                        up = info("ffn_up_shexp", shexp_up, {m->D, m->F}),
                        down = info("ffn_down_shexp", shexp_down, {m->F, m->D});
  m->l.ffn_gate_shexp = &gate;
  m->l.ffn_up_shexp = &up;
  m->l.ffn_down_shexp = &down;
  latte::MoeConfig moe;
  moe.n_expert = 8;
  moe.n_expert_used = 2;

  ggl::Graph g;
  std::vector<float> x(static_cast<size_t>(m->D));
  ggl::Tensor* xt = g.external(ggl::Type::F32, std::vector<int64_t>{m->D, 1}, x.data(), "x");
  latte::moe_ffn(g, xt, m->l, moe);
  const size_t moe_nodes = g.nodes().size();
  latte::swiglu_ffn(g, xt, &gate, &up, &down);  // as a dense layer's feed-forward
  int coarse = 0, fine = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const ggl::Tensor& t = *g.nodes()[i];
    if (t.op != ggl::Op::kMulMat && t.op != ggl::Op::kMulMatId) continue;
    const bool expert = i < moe_nodes && t.src[0]->name != "ffn_gate_inp";
    const bool is_coarse = ggl::activation_precision(t) == ggl::ActivationPrecision::kCoarse;
    EXPECT_EQ(is_coarse, expert) << t.src[0]->name << (i < moe_nodes ? " in the MoE" : " as a dense FFN");
    (is_coarse ? coarse : fine) += 1;
  }
  EXPECT_EQ(coarse, 6);  // 3 routed, 3 shared
  EXPECT_EQ(fine, 4);    // the router, the dense gate, up and down
}

}  // namespace test_moe_routing
