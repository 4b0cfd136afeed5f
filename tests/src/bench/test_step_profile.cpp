// `latte bench --profile`'s aggregation (src/bench/step_profile.h): the kind each node counts as,
// the weight bytes a product reads, run times averaged over the team, and each barrier's wait
// charged to the work the team was finishing; on a graph and a profile with known numbers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ggml-like/graph/graph.h"
#include "ggml-like/quant/quant.h"
#include "src/bench/step_profile.h"

namespace test_step_profile {

using ggl::Graph;
using ggl::Tensor;
using ggl::Type;

TEST(StepProfile, ChargesEachNodeAndEachWaitToItsKind) {
  const int64_t K = 256, N = 64, F = 32, E = 8;
  std::vector<uint8_t> q(ggl::row_bytes(Type::Q8_0, K) * N), up(ggl::row_bytes(Type::Q8_0, K) * F * E);
  std::vector<float> x(K);
  std::vector<int32_t> ids = {5, 2};
  Graph g;
  Tensor* xt = g.external(Type::F32, std::vector<int64_t>{K, 1}, x.data(), "x");
  Tensor* q3 = g.mul_mat(g.external(Type::Q8_0, std::vector<int64_t>{K, N}, q.data(), "blk.3.attn_q.weight"), xt);
  g.rms_norm(q3, 1e-6f);
  Tensor* experts = g.external(Type::Q8_0, std::vector<int64_t>{K, F, E}, up.data(), "blk.3.ffn_up_exps.weight");
  g.mul_mat_id(experts, g.reshape(xt, {K, 1, 1, 1}),
               g.external(Type::I32, std::vector<int64_t>{2, 1}, ids.data(), "ids"));
  g.mul_mat(g.external(Type::Q8_0, std::vector<int64_t>{K, N}, q.data(), "blk.4.attn_q.weight"), xt);
  EXPECT_EQ(latte::bench::step_tokens(g), 1);

  // Computed node c (0..3: the two products around the norm and the experts) ran c + 1 ms on
  // thread 0 and c + 3 on thread 1, after waiting 0.5 and 1.5 ms.
  ggl::CpuProfile p;
  p.threads = 2;
  p.run.assign(g.nodes().size() * 2, 0.0);
  p.wait.assign(p.run.size(), 0.0);
  int c = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (g.nodes()[i]->op == ggl::Op::kLeaf || g.nodes()[i]->op == ggl::Op::kView) continue;
    p.run[2 * i] = (c + 1) * 1e-3;
    p.run[2 * i + 1] = (c + 3) * 1e-3;
    p.wait[2 * i] = 0.5e-3;
    p.wait[2 * i + 1] = 1.5e-3;
    ++c;
  }
  ASSERT_EQ(c, 4);
  latte::bench::StepProfile profile;
  profile.add(g, p);
  profile.add(g, p);
  EXPECT_EQ(profile.steps(), 2);

  const auto& kinds = profile.kinds();
  ASSERT_EQ(kinds.size(), 3u);
  const auto& attn = kinds.at("mul_mat attn_q q8_0");  // nodes 0 and 3, twice
  EXPECT_EQ(attn.calls, 4);
  EXPECT_NEAR(attn.run, 2 * ((0 + 2) + (3 + 2)) * 1e-3, 1e-12);
  EXPECT_NEAR(attn.wait, 2 * 1e-3, 1e-12) << "the wait before the norm; nothing follows node 3";
  EXPECT_DOUBLE_EQ(attn.bytes, 4.0 * N * ggl::row_bytes(Type::Q8_0, K));
  const auto& norm = kinds.at("rms_norm");
  EXPECT_EQ(norm.calls, 2);
  EXPECT_NEAR(norm.run, 2 * 3e-3, 1e-12);
  EXPECT_NEAR(norm.wait, 2 * 1e-3, 1e-12);
  EXPECT_EQ(norm.bytes, 0.0);
  const auto& up_kind = kinds.at("mul_mat_id ffn_up_exps q8_0");
  EXPECT_NEAR(up_kind.run, 2 * 4e-3, 1e-12);
  EXPECT_NEAR(up_kind.wait, 2 * 1e-3, 1e-12);
  EXPECT_DOUBLE_EQ(up_kind.bytes, 2.0 * 2 * F * ggl::row_bytes(Type::Q8_0, K)) << "the two chosen experts";

  const std::string table = profile.table("decode steps (1 token)");
  EXPECT_NE(table.find("decode steps (1 token): 2 steps, 17.00 ms each"), std::string::npos) << table;
  // Slowest first: attn_q (7 + 1 ms a step), ffn_up_exps (4 + 1), rms_norm (3 + 1).
  const size_t a = table.find("| mul_mat attn_q q8_0 |"), u = table.find("| mul_mat_id ffn_up_exps q8_0 |"),
               n = table.find("| rms_norm |");
  ASSERT_NE(a, std::string::npos) << table;
  EXPECT_LT(a, u);
  EXPECT_LT(u, n);
  EXPECT_NE(table.find("| all | | 14.000 | 100 | 3.000 |"), std::string::npos) << table;
}

// A product through a strided view of its weight (MLA's key half of attn_kv_b: 2 of every 4
// rows) reads the view's rows, not the span from its first row to its last.
TEST(StepProfile, AStridedWeightViewReadsItsRowsOnly) {
  const int64_t K = 64, N = 16;
  const size_t rb = ggl::row_bytes(Type::Q8_0, K);
  std::vector<uint8_t> w(rb * 2 * N);
  std::vector<float> x(K);
  Graph g;
  Tensor* all = g.external(Type::Q8_0, std::vector<int64_t>{K, 2 * N}, w.data(), "blk.0.attn_kv_b.weight");
  Tensor* half = g.view(all, {K, 2, N / 2, 1}, {all->nb[0], rb, 4 * rb, 4 * rb * N / 2}, 0);  // rows 4i, 4i + 1
  Tensor* x2 = g.external(Type::F32, std::vector<int64_t>{K, 1}, x.data(), "x");
  Tensor* product = g.mul_mat(half, x2);
  EXPECT_EQ(latte::bench::work_kind(*product), "mul_mat attn_kv_b q8_0");
  EXPECT_DOUBLE_EQ(latte::bench::weight_bytes_read(*product), static_cast<double>(N * rb));
}

TEST(StepProfile, IgnoresAProfileOfAnotherGraph) {
  Graph g;
  std::vector<float> x(8);
  g.rms_norm(g.external(Type::F32, std::vector<int64_t>{8}, x.data(), "x"), 1e-6f);
  latte::bench::StepProfile profile;
  profile.add(g, ggl::CpuProfile{});  // profiling was off
  ggl::CpuProfile wrong;
  wrong.threads = 2;
  wrong.run.assign(1, 0.0);  // not two entries per node
  wrong.wait.assign(1, 0.0);
  profile.add(g, wrong);
  EXPECT_EQ(profile.steps(), 0);
  EXPECT_TRUE(profile.table("decode").empty());
}

}  // namespace test_step_profile
