// The forward pass against the oracle's logits (../shared/fixtures, ../shared/models), under
// several evaluation schedules, MLA modes and cache element types. Thresholds and the metric
// definitions are those of ../shared/fixtures/README.md. Every case prints its numbers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/gguf/gguf.h"
#include "ggml-like/quant/quant.h"
#include "src/model/graph_blocks.h"
#include "src/model/hparams.h"
#include "src/runtime/session.h"
#include "tests/support/logit_metrics.h"
#include "tests/support/test_support.h"

namespace test_forward_fixtures {

using latte::testing::LogitMetrics;

// How the reference was produced matters for the thresholds.
struct Fixture {
  std::string name;  // test name
  std::string gguf;  // relative to shared_dir()
  std::string tokens;
  std::string reference;  // logits to compare with
  bool quantized;
  // Quantized fixtures: the oracle's own distance from the exact result (README table), or the
  // file whose distance to `reference` gives it.
  double oracle_nrmse = 0, oracle_mean_kl = 0;
  std::string oracle_logits;
  // Positions where the reference's MoE routing is a near-tie (expert scores closer than float32
  // evaluation orders move them): there latte and the reference may choose different experts and
  // the logits then follow other weights. They are left out of the metrics, and with an f32 cache
  // the test checks that latte's routing there is indeed that close to another choice
  // (kNearTieMargin; the other caches move the router's input by more than that).
  std::vector<size_t> near_tie_positions = {};
};

// The router logit change (max norm) within which a listed near-tie's choice must flip, with an f32
// cache: latte's F32 logits differ from the reference's by about 1e-4 relative on the fixtures
// (known answer 2), and the router's logits are of order 1; the margins measured are 1e-5 to
// 1.6e-4 depending on the MLA form, schedule and kernel set.
constexpr double kNearTieMargin = 1e-3;

const std::vector<Fixture>& fixtures() {
  static const std::vector<Fixture> all = [] {
    std::vector<Fixture> f;
    auto exact = [&f](const char* name, bool quantized, double nrmse = 0, double kl = 0) {
      const std::string base = std::string("fixtures/") + name;
      f.push_back({name, base + ".gguf", base + ".tokens.txt", base + (quantized ? ".exact-logits.f32" : ".logits.f32"),
                   quantized, nrmse, kl, ""});
    };
    exact("ds2-v2-tiny-f32", false);
    exact("ds2-mini-mla-f32", false);
    exact("llama-gqa-tiny-f32", false);
    exact("ds2-lite-27l-q8_0", true, 0.0740, 0.0306);
    exact("ds2-v2-tiny-q8_0", true, 0.0187, 0.00189);
    exact("ds3-tiny-q4_0", true, 0.0753, 0.0292);
    exact("llama-gqa-tiny-q8_0", true, 0.0129, 0.00086);
    // llama.cpp's K-quant, IQ4 and Q5 files of one DeepSeek-V3-flavoured model, against the exact
    // result for their weights (fixtures/kquant/README.md, its oracle table).
    auto kquant = [&f](const char* type, double nrmse, double kl) {
      const std::string base = std::string("fixtures/kquant/kq-tiny-") + type;
      f.push_back({std::string("kq-tiny-") + type, base + ".gguf", "fixtures/kquant/kq-tiny.tokens.txt",
                   base + ".exact-logits.f32", true, nrmse, kl, ""});
    };
    kquant("q2_k", 0.0232, 0.00335);
    kquant("q3_k_m", 0.0228, 0.0029);
    kquant("q4_k_s", 0.0566, 0.00756);
    kquant("q4_k_m", 0.0567, 0.00856);
    kquant("q5_k_m", 0.0708, 0.0185);
    kquant("q6_k", 0.0227, 0.00289);
    kquant("iq4_xs", 0.023, 0.00276);
    kquant("iq4_nl", 0.0167, 0.00151);
    kquant("q5_0", 0.0518, 0.0186);
    kquant("q5_1", 0.0168, 0.00174);
    // llama.cpp's IQ1-IQ3 files of the same model, made with an importance matrix
    // (fixtures/iquant/README.md, its oracle table).
    auto iquant = [&f](const char* type, double nrmse, double kl) {
      const std::string base = std::string("fixtures/iquant/kq-tiny-") + type;
      f.push_back({std::string("kq-tiny-") + type, base + ".gguf", "fixtures/kquant/kq-tiny.tokens.txt",
                   base + ".exact-logits.f32", true, nrmse, kl, ""});
    };
    iquant("iq1_s", 0.0248, 0.00355);
    iquant("iq1_m", 0.0252, 0.0035);
    iquant("iq2_xxs", 0.0232, 0.00295);
    iquant("iq2_xs", 0.0408, 0.0106);
    iquant("iq2_s", 0.0239, 0.00329);
    iquant("iq2_m", 0.0235, 0.00293);
    iquant("iq3_xxs", 0.0221, 0.00258);
    iquant("iq3_xs", 0.0233, 0.00312);
    iquant("iq3_s", 0.0233, 0.0031);
    // Position 1's second and third experts score 0.8181878 and 0.8181932 (sigmoid plus bias): a
    // router logit change of about 2e-5 swaps them, below the 1e-4 level at which latte's F32
    // logits differ from the reference's on these files; the reference chose the other one.
    f.back().near_tie_positions = {1};
    iquant("iq3_m", 0.0881, 0.0483);
    f.push_back({"stories260K", "models/stories260K.gguf", "models/stories260K.tokens.txt",
                 "models/stories260K.logits.f32", false, 0, 0, ""});
    f.push_back({"tiny-mla-stories-f32", "models/tiny-mla-stories-f32.gguf", "models/tiny-mla-stories.tokens.txt",
                 "models/tiny-mla-stories-f32.logits.f32", false, 0, 0, ""});
    // The q8_0 file against the exact (F32) model: the oracle's figure is its own q8_0 run's
    // distance from the F32 reference.
    f.push_back({"tiny-mla-stories-q8_0", "models/tiny-mla-stories-q8_0.gguf", "models/tiny-mla-stories.tokens.txt",
                 "models/tiny-mla-stories-f32.logits.f32", true, 0, 0, "models/tiny-mla-stories-q8_0.logits.f32"});
    return f;
  }();
  return all;
}

enum class Schedule { kAllAtOnce, kChunksOf7, kPrefill40ThenDecode };
const char* schedule_name(Schedule s) {
  switch (s) {
    case Schedule::kAllAtOnce: return "all";
    case Schedule::kChunksOf7: return "chunks7";
    case Schedule::kPrefill40ThenDecode: return "prefill40+decode";
  }
  return "?";
}

struct Case {
  int fixture;
  ggl::Type cache;
  latte::MlaMode mode;
  Schedule schedule;
};

std::string case_name(const Case& c) {
  std::string s = fixtures()[c.fixture].name + "_" + std::string(ggl::type_name(c.cache)) + "_" +
                  std::string(latte::mla_mode_name(c.mode)) + "_" + schedule_name(c.schedule);
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

// Whether the fixture's model uses multi-head latent attention (then the absorbed and naive forms
// run too), from the hyperparameters in its file; reading them parses only the header. A missing
// file counts as not MLA: its cases skip anyway.
bool is_mla_fixture(const Fixture& f) {
  const std::filesystem::path path = latte::testing::shared_dir() / f.gguf;
  if (!std::filesystem::exists(path)) return false;
  return latte::read_hparams(ggl::GgufFile(path.string())).is_mla();
}

// The matrix: every schedule and mode with an f32 cache; every schedule with the default f16
// cache; absorb and naive with f16 through the decode schedule; bf16 and q8_0 caches once each.
std::vector<Case> all_cases() {
  using latte::MlaMode;
  std::vector<Case> cases;
  const Schedule schedules[] = {Schedule::kAllAtOnce, Schedule::kChunksOf7, Schedule::kPrefill40ThenDecode};
  for (int i = 0; i < static_cast<int>(fixtures().size()); ++i) {
    const bool mla = is_mla_fixture(fixtures()[i]);
    const std::vector<MlaMode> modes = mla ? std::vector<MlaMode>{MlaMode::kAuto, MlaMode::kAbsorb, MlaMode::kNaive}
                                           : std::vector<MlaMode>{MlaMode::kAuto};
    for (MlaMode m : modes)
      for (Schedule s : schedules) cases.push_back({i, ggl::Type::F32, m, s});
    for (Schedule s : schedules) cases.push_back({i, ggl::Type::F16, MlaMode::kAuto, s});
    if (mla)
      for (MlaMode m : {MlaMode::kAbsorb, MlaMode::kNaive})
        cases.push_back({i, ggl::Type::F16, m, Schedule::kPrefill40ThenDecode});
    cases.push_back({i, ggl::Type::BF16, MlaMode::kAuto, Schedule::kPrefill40ThenDecode});
    cases.push_back({i, ggl::Type::Q8_0, MlaMode::kAuto, Schedule::kPrefill40ThenDecode});
  }
  return cases;
}

const latte::Model& model_for(const Fixture& f) {
  static std::map<std::string, std::unique_ptr<latte::Model>> models;
  auto& m = models[f.gguf];
  if (!m) m = std::make_unique<latte::Model>((latte::testing::shared_dir() / f.gguf).string());
  return *m;
}

// ---- Routing ----------------------------------------------------------------------------------

// One MoE layer's router at one position, as the graph computed it.
struct RouterStep {
  std::vector<float> logits;    // [E]
  std::vector<int32_t> chosen;  // [k]
};
using Routing = std::vector<std::vector<RouterStep>>;  // [MoE layer][position]

// Session hooks that append every graph's router tensors (named in graph_blocks.h) to *out.
void record_routing(latte::SessionOptions& o, Routing* out) {
  o.on_graph_built = [](ggl::Graph& g) {
    for (ggl::Tensor* t : g.nodes()) {
      if (t->name == latte::kMoeRouterLogits || t->name == latte::kMoeChosenExperts) g.mark_output(t);
    }
  };
  o.on_graph_run = [out](const ggl::Graph& g, ggl::Backend& backend) {
    auto read = [&backend](const ggl::Tensor& t, auto* dst) {
      backend.read(t, dst, 0, static_cast<size_t>(t.n_elements()) * sizeof(*dst));
    };
    size_t logits_seen = 0, ids_seen = 0;
    for (const ggl::Tensor* t : g.nodes()) {
      if (t->name == latte::kMoeRouterLogits) {
        const int64_t E = t->ne[0], T = t->ne[1];
        std::vector<float> logits(static_cast<size_t>(E * T));
        read(*t, logits.data());
        if (out->size() <= logits_seen) out->resize(logits_seen + 1);
        for (int64_t i = 0; i < T; ++i)
          (*out)[logits_seen].push_back({{logits.begin() + i * E, logits.begin() + (i + 1) * E}, {}});
        ++logits_seen;
      } else if (t->name == latte::kMoeChosenExperts) {
        const int64_t k = t->ne[0], T = t->ne[1];
        std::vector<int32_t> ids(static_cast<size_t>(k * T));
        read(*t, ids.data());
        std::vector<RouterStep>& steps = out->at(ids_seen++);  // its logits came first
        for (int64_t i = 0; i < T; ++i)
          steps[steps.size() - static_cast<size_t>(T - i)].chosen.assign(ids.begin() + i * k,
                                                                         ids.begin() + (i + 1) * k);
      }
    }
  };
}

std::vector<float> evaluate(const latte::Model& model, const std::vector<int32_t>& tokens, const Case& c,
                            Routing* routing = nullptr) {
  latte::SessionOptions o;
  if (routing) record_routing(o, routing);
  o.cache_type = c.cache;
  o.mla_mode = c.mode;
  o.n_ctx = static_cast<int64_t>(tokens.size());
  o.n_batch = c.schedule == Schedule::kChunksOf7 ? 7 : 512;
  // One thread keeps the suite fast when test programs run side by side; the chunked schedule
  // runs on two threads so the threaded kernels meet the thresholds too.
  o.n_threads = c.schedule == Schedule::kChunksOf7 ? 2 : 1;
  latte::Session s(model, o);
  const std::span<const int32_t> all(tokens);
  if (c.schedule != Schedule::kPrefill40ThenDecode) return s.eval(all);
  std::vector<float> logits = s.eval(all.first(40));
  for (size_t i = 40; i < tokens.size(); ++i) {
    const std::vector<float> step = s.eval(all.subspan(i, 1));
    if (c.mode != latte::MlaMode::kNaive) {
      EXPECT_EQ(s.last_mla_path(), latte::MlaMode::kAbsorb) << "a decode step must use the absorbed path";
    }
    logits.insert(logits.end(), step.begin(), step.end());
  }
  return logits;
}

// ---- The bf16 cache on unquantized models ------------------------------------------------------
//
// A bf16 cache keeps 8 significant bits. Its rounding moves a router's logits a little, and where
// two experts' scores are closer than that the other one may be chosen: that position's output
// then follows another expert's weights, and on the random MoE fixtures the README's bound
// (nrmse <= 5e-3 over all positions) is missed by that position alone (docs/testing-bf16-cache.md
// has the measurements). Such a position is a near-tie, not an error of the bf16 path, so the
// check is, against the oracle and runs of the same schedule with f32 and f16 caches:
//   (a) over the positions where every MoE layer chose the same experts as with f32, the README's
//       bound: nrmse <= 5e-3;
//   (b) where a layer chose differently, the f32 run's choice was within bf16's reach: its logit
//       margin (logit_margin) is below what bf16 rounding moves that layer's router logits, taken
//       from the f16 run (bf16_logit_reach);
//   (c) such positions are few (at most 1 in 20), so that (a) still judges nearly all of them.

// Unit roundoffs (round to nearest even): bf16 keeps 8 significant bits, f16 11.
constexpr double kBf16UnitRoundoff = 0x1p-8;
constexpr double kF16UnitRoundoff = 0x1p-11;

// The experts the router's rule picks from logits z (moe_ffn, graph.h's top_k): the gating's
// scores plus the selection bias, the best n_groups_used groups by the sum of their two best
// members when group-limited, then the k best; ties to the lower index. Sorted.
std::vector<int32_t> rule_choice(const std::vector<double>& z, const latte::MoeConfig& moe,
                                 const std::vector<double>& bias) {
  const size_t E = z.size();
  std::vector<double> sel(E);
  if (moe.gating == latte::ExpertGating::kSigmoid) {
    for (size_t e = 0; e < E; ++e) sel[e] = 1.0 / (1.0 + std::exp(-z[e]));
  } else {
    const double mx = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (size_t e = 0; e < E; ++e) sum += sel[e] = std::exp(z[e] - mx);
    for (double& v : sel) v /= sum;
  }
  for (size_t e = 0; e < E; ++e) sel[e] += bias[e];
  const size_t per = E / static_cast<size_t>(moe.n_groups);
  std::vector<std::pair<double, size_t>> groups;  // (-score, group): best first, ties to the lower
  for (size_t g = 0; g < static_cast<size_t>(moe.n_groups); ++g) {
    std::vector<double> v(sel.begin() + static_cast<std::ptrdiff_t>(g * per),
                          sel.begin() + static_cast<std::ptrdiff_t>((g + 1) * per));
    std::sort(v.rbegin(), v.rend());
    groups.push_back({-(per > 1 ? v[0] + v[1] : v[0]), g});
  }
  std::sort(groups.begin(), groups.end());
  std::vector<size_t> candidates;
  for (size_t i = 0; i < static_cast<size_t>(moe.n_groups_used); ++i)
    for (size_t j = 0; j < per; ++j) candidates.push_back(groups[i].second * per + j);
  std::sort(candidates.begin(), candidates.end(),
            [&sel](size_t a, size_t b) { return sel[a] > sel[b] || (sel[a] == sel[b] && a < b); });
  std::vector<int32_t> chosen(candidates.begin(), candidates.begin() + moe.n_expert_used);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

std::vector<int32_t> sorted(std::vector<int32_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// How far the router's logits must move (the same amount for every expert, i.e. in the max norm)
// before it chooses other experts than it did: the chosen ones lowered and the others raised by
// delta is the change that gets there soonest (exactly so where each expert's score rises with its
// own logit alone: sigmoid, or softmax without a bias). 0 where the rule already disagrees with
// the graph (a tie at float precision); infinity where no such change reaches another choice.
double logit_margin(const RouterStep& s, const latte::MoeConfig& moe, const std::vector<double>& bias) {
  const std::vector<int32_t> chosen = sorted(s.chosen);
  auto moved = [&](double delta) {
    std::vector<double> z(s.logits.begin(), s.logits.end());
    for (size_t e = 0; e < z.size(); ++e)
      z[e] += std::binary_search(chosen.begin(), chosen.end(), static_cast<int32_t>(e)) ? -delta : delta;
    return rule_choice(z, moe, bias) != chosen;
  };
  if (moved(0)) return 0;
  double hi = 1;
  while (!moved(hi))
    if ((hi *= 2) > 1e6) return INFINITY;
  double lo = 0;
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2;
    (moved(mid) ? hi : lo) = mid;
  }
  return hi;
}

// Whether a position chose the same experts in every MoE layer in two runs.
bool routes_alike(const Routing& a, const Routing& b, size_t p) {
  for (size_t m = 0; m < a.size(); ++m)
    if (sorted(a[m][p].chosen) != sorted(b[m][p].chosen)) return false;
  return true;
}

// How far rounding the cache to bf16 moves one MoE layer's router logits. To first order the
// change is linear in the rounding errors of the cached values, which scale with the format's
// unit roundoff, so it is the change an f16 cache causes (its largest over the experts and the
// positions that route alike) times bf16's unit roundoff over f16's (8). The f16 run measures how
// the model carries a rounding of the cache to the router; nothing of the bf16 run goes into it.
double bf16_logit_reach(const Routing& f32, const Routing& f16, size_t m) {
  double largest = 0;
  for (size_t p = 0; p < f32[m].size(); ++p) {
    if (!routes_alike(f32, f16, p)) continue;  // past a choice the change is not small
    for (size_t e = 0; e < f32[m][p].logits.size(); ++e)
      largest = std::max(largest, std::fabs(static_cast<double>(f16[m][p].logits[e]) - f32[m][p].logits[e]));
  }
  return kBf16UnitRoundoff / kF16UnitRoundoff * largest;
}

// The rows of the listed positions.
std::vector<float> positions_of(const std::vector<float>& logits, size_t n_vocab, const std::vector<size_t>& keep) {
  std::vector<float> out;
  for (size_t p : keep)
    out.insert(out.end(), logits.begin() + static_cast<std::ptrdiff_t>(p * n_vocab),
               logits.begin() + static_cast<std::ptrdiff_t>((p + 1) * n_vocab));
  return out;
}

void expect_bf16_cache_bound(const latte::Model& model, const std::vector<int32_t>& tokens, const Case& c,
                             const std::vector<float>& ref, const std::vector<float>& logits, const Routing& routing) {
  const latte::Hparams& hp = model.hparams();
  const size_t n_vocab = static_cast<size_t>(hp.n_vocab), n_pos = tokens.size();
  std::vector<const latte::LayerWeights*> moe_layers;
  for (const latte::LayerWeights& l : model.weights().layers)
    if (l.is_moe()) moe_layers.push_back(&l);
  Routing f32, f16;
  Case other = c;
  other.cache = ggl::Type::F32;
  evaluate(model, tokens, other, &f32);
  other.cache = ggl::Type::F16;
  evaluate(model, tokens, other, &f16);
  const Routing* const runs[] = {&routing, &f32, &f16};
  for (const Routing* r : runs) {
    ASSERT_EQ(r->size(), moe_layers.size()) << "MoE layers whose routing a run recorded";
    for (const std::vector<RouterStep>& layer : *r) ASSERT_EQ(layer.size(), n_pos) << "positions routed";
  }

  int rule_disagrees = 0;
  for (size_t m = 0; m < moe_layers.size(); ++m) {
    const latte::LayerWeights& l = *moe_layers[m];
    std::vector<double> bias(static_cast<size_t>(hp.moe.n_expert), 0.0);
    if (l.exp_probs_b) {
      std::vector<float> b(bias.size());
      ggl::dequantize_row(l.exp_probs_b->type, l.exp_probs_b->data, b.data(), hp.moe.n_expert);
      bias.assign(b.begin(), b.end());
    }
    const double reach = bf16_logit_reach(f32, f16, m);
    for (size_t p = 0; p < n_pos; ++p) {
      const RouterStep& s = f32[m][p];
      if (rule_choice(std::vector<double>(s.logits.begin(), s.logits.end()), hp.moe, bias) != sorted(s.chosen))
        ++rule_disagrees;
      if (sorted(routing[m][p].chosen) == sorted(s.chosen)) continue;
      const double margin = logit_margin(s, hp.moe, bias);
      std::printf(
          "[routing] MoE layer %zu position %zu chose other experts than with f32: logit margin %.3e, "
          "bf16 reach %.3e\n",
          m, p, margin, reach);
      EXPECT_LT(margin, reach) << "MoE layer " << m << " position " << p
                               << ": the routing changed where bf16 rounding cannot reach the f32 run's margin";
    }
  }
  // The margins come from the test's own rule: it must choose as the graph did.
  EXPECT_EQ(rule_disagrees, 0) << "positions of the f32 run where the test's routing rule differs from the graph's";

  std::vector<size_t> alike;
  for (size_t p = 0; p < n_pos; ++p)
    if (routes_alike(f32, routing, p)) alike.push_back(p);
  const size_t n_differ = n_pos - alike.size();
  EXPECT_LE(n_differ * 20, n_pos) << n_differ << " of " << n_pos << " positions chose other experts than with f32";
  ASSERT_FALSE(alike.empty());
  const LogitMetrics m =
      latte::testing::compare_logits(positions_of(ref, n_vocab, alike), positions_of(logits, n_vocab, alike), n_vocab);
  std::printf("[metrics] the %zu of %zu positions routed as with f32: nrmse=%.3e mean_kl=%.3e max_kl=%.3e top1=%.3f\n",
              alike.size(), n_pos, m.nrmse, m.mean_kl, m.max_kl, m.top1);
  EXPECT_LE(m.nrmse, 5e-3);
}

// Each listed near-tie is one: in some MoE layer, a router logit change below kNearTieMargin
// chooses other experts than latte did.
void expect_near_ties(const latte::Model& model, const std::vector<size_t>& positions, const Routing& routing) {
  const latte::Hparams& hp = model.hparams();
  std::vector<const latte::LayerWeights*> moe_layers;
  for (const latte::LayerWeights& l : model.weights().layers)
    if (l.is_moe()) moe_layers.push_back(&l);
  ASSERT_EQ(routing.size(), moe_layers.size()) << "MoE layers whose routing the run recorded";
  for (size_t p : positions) {
    double margin = INFINITY;
    for (size_t m = 0; m < moe_layers.size(); ++m) {
      ASSERT_LT(p, routing[m].size());
      std::vector<double> bias(static_cast<size_t>(hp.moe.n_expert), 0.0);
      if (moe_layers[m]->exp_probs_b) {
        std::vector<float> b(bias.size());
        ggl::dequantize_row(moe_layers[m]->exp_probs_b->type, moe_layers[m]->exp_probs_b->data, b.data(),
                            hp.moe.n_expert);
        bias.assign(b.begin(), b.end());
      }
      margin = std::min(margin, logit_margin(routing[m][p], hp.moe, bias));
    }
    std::printf("[routing] near-tie position %zu: logit margin %.3e\n", p, margin);
    EXPECT_LT(margin, kNearTieMargin) << "position " << p << " is listed as a near-tie but is not one";
  }
}

class ForwardFixture : public ::testing::TestWithParam<Case> {};

TEST_P(ForwardFixture, MatchesReferenceLogits) {
  const Case c = GetParam();
  const Fixture& f = fixtures()[c.fixture];
  LATTE_REQUIRE_SHARED(f.gguf);
  LATTE_REQUIRE_SHARED(f.reference);
  const latte::Model& model = model_for(f);
  if (c.cache == ggl::Type::Q8_0) {
    try {
      latte::check_cache_type(model.hparams(), c.cache);
    } catch (const ggl::Error& e) {
      GTEST_SKIP() << "q8_0 cache not applicable: " << e.what();
    }
  }
  const auto tokens = latte::testing::read_token_file(latte::testing::shared_dir() / f.tokens);
  const auto ref = latte::testing::read_f32_file(latte::testing::shared_dir() / f.reference);
  // An unquantized model with a bf16 cache is judged with its routing (expect_bf16_cache_bound).
  const bool bf16_check = !f.quantized && c.cache == ggl::Type::BF16;
  const bool near_ties = !f.near_tie_positions.empty();
  Routing routing;
  const std::vector<float> logits = evaluate(model, tokens, c, bf16_check || near_ties ? &routing : nullptr);
  const size_t n_vocab = static_cast<size_t>(model.hparams().n_vocab);
  ASSERT_EQ(logits.size(), tokens.size() * n_vocab);
  std::vector<size_t> kept;
  for (size_t p = 0; p < tokens.size(); ++p)
    if (std::find(f.near_tie_positions.begin(), f.near_tie_positions.end(), p) == f.near_tie_positions.end())
      kept.push_back(p);
  if (near_ties && c.cache == ggl::Type::F32) expect_near_ties(model, f.near_tie_positions, routing);
  const LogitMetrics m =
      latte::testing::compare_logits(positions_of(ref, n_vocab, kept), positions_of(logits, n_vocab, kept), n_vocab);
  std::printf("[metrics] %-22s cache=%-4s mla=%-6s %-17s nrmse=%.3e mean_kl=%.3e max_kl=%.3e top1=%.3f\n",
              f.name.c_str(), ggl::type_name(c.cache).data(), latte::mla_mode_name(c.mode).data(),
              schedule_name(c.schedule), m.nrmse, m.mean_kl, m.max_kl, m.top1);

  if (f.quantized) {
    double oracle_nrmse = f.oracle_nrmse, oracle_kl = f.oracle_mean_kl;
    if (!f.oracle_logits.empty()) {
      const LogitMetrics o = latte::testing::compare_logits(
          ref, latte::testing::read_f32_file(latte::testing::shared_dir() / f.oracle_logits), n_vocab);
      oracle_nrmse = o.nrmse;
      oracle_kl = o.mean_kl;
    }
    EXPECT_LE(m.nrmse, std::max(1.25 * oracle_nrmse, 0.005));
    EXPECT_LE(m.mean_kl, std::max(1.5 * oracle_kl, 1e-4));
    return;
  }
  switch (c.cache) {
    case ggl::Type::F32:
      EXPECT_LE(m.nrmse, 1e-3);
      EXPECT_LE(m.max_kl, 1e-4);
      EXPECT_EQ(m.top1, 1.0);
      break;
    case ggl::Type::F16: EXPECT_LE(m.nrmse, 2e-3); break;
    case ggl::Type::BF16: expect_bf16_cache_bound(model, tokens, c, ref, logits, routing); break;
    default:
      // q8_0 cache: the README gives no bound for F32 fixtures; 8-bit rows move the logits by
      // about 5e-3, so latte holds them to 1e-2 (quantized fixtures meet the README thresholds).
      EXPECT_LE(m.nrmse, 1e-2);
      EXPECT_GE(m.top1, 0.98);
      break;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ForwardFixture, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) { return case_name(info.param); });

}  // namespace test_forward_fixtures
