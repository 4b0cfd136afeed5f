// Q4_0, Q8_0 and Q6_K matrices rewritten at load into 8 interleaved rows (ggml-like/cpu/
// interleaved.h, repacked_weights.h): the layout itself, the CPU backend's weights hook
// (Backend::prepare_weights / use_prepared_weights) that makes and reads the copies, which tensors
// a model has rewritten, and that a repacked model computes what the file's layout does, with every
// kernel set that has interleaved kernels (the others rewrite nothing).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ggml-like/backend/scheduler.h"
#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/gguf/gguf.h"
#include "ggml-like/cpu/interleaved.h"
#include "ggml-like/quant/kquants.h"
#include "ggml-like/quant/legacy.h"
#include "ggml-like/quant/quant.h"
#include "src/model/model.h"
#include "src/runtime/offload.h"
#include "src/runtime/session.h"
#include "tests/support/kernel_sets.h"
#include "tests/support/logit_metrics.h"
#include "tests/support/simulated_device.h"
#include "tests/support/test_support.h"

namespace test_interleave {

using ggl::Type;

// The layout of interleaved type t over plain type p: per group and block, the 8 scales, then
// quant bytes 4u..4u+3 of row r at (u * 8 + r) * 4; and back again.
void check_layout(Type t, Type p, size_t quant_bytes) {
  constexpr int64_t rows = 16, n = 64, blocks = n / 32;
  const size_t block_bytes = 2 + quant_bytes;
  std::vector<uint8_t> plain(ggl::row_bytes(p, n) * rows);
  std::mt19937 rng(3);
  for (uint8_t& b : plain) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> mixed(plain.size()), back(plain.size());
  ggl::interleave_rows(t, plain.data(), mixed.data(), rows, n);
  for (int64_t g = 0; g < rows / 8; ++g)
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* at = mixed.data() + (g * blocks + b) * 8 * block_bytes;
      for (int64_t r = 0; r < 8; ++r) {
        const uint8_t* block = plain.data() + ((g * 8 + r) * blocks + b) * block_bytes;
        EXPECT_EQ(std::memcmp(at + 2 * r, block, 2), 0);
        for (size_t u = 0; u < quant_bytes / 4; ++u)
          EXPECT_EQ(std::memcmp(at + 16 + (u * 8 + r) * 4, block + 2 + 4 * u, 4), 0) << ggl::type_name(t);
      }
    }
  for (int64_t g = 0; g < rows / 8; ++g)
    ggl::deinterleave_group(t, mixed.data() + g * 8 * ggl::row_bytes(p, n), back.data() + g * 8 * ggl::row_bytes(p, n),
                            n);
  EXPECT_EQ(back, plain) << ggl::type_name(t);
}

TEST(Interleave, LayoutPutsFourQuantBytesOfEachRowSideBySide) {
  check_layout(ggl::kQ4_0_R8, Type::Q4_0, 16);
  check_layout(ggl::kQ8_0_R8, Type::Q8_0, 32);
}

// Q6_K_R8 (interleaved.h): the rows' d and scales side by side, and every element's 6-bit quant
// where the layout says, read back as the reference dequantization reads the plain block; and back.
TEST(Interleave, Q6_KLayoutAndBack) {
  constexpr int64_t rows = 16, n = 512, blocks = n / 256;
  std::vector<uint8_t> plain(ggl::row_bytes(Type::Q6_K, n) * rows);
  std::mt19937 rng(5);
  for (uint8_t& b : plain) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> mixed(plain.size()), back(plain.size());
  ggl::interleave_rows(ggl::kQ6_K_R8, plain.data(), mixed.data(), rows, n);
  const auto* src = reinterpret_cast<const ggl::BlockQ6_K*>(plain.data());
  for (int64_t g = 0; g < rows / 8; ++g)
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* at = mixed.data() + (g * blocks + b) * ggl::q6_k_r8::kGroupBytes;
      for (int64_t r = 0; r < 8; ++r) {
        const ggl::BlockQ6_K& block = src[(g * 8 + r) * blocks + b];
        EXPECT_EQ(std::memcmp(at + 2 * r, &block.d, 2), 0);
        for (int j = 0; j < 16; ++j) EXPECT_EQ(static_cast<int8_t>(at[16 + 8 * j + r]), block.scales[j]);
        for (int e = 0; e < 256; ++e) {
          const int h = e / 128, k = (e % 128) / 32, l = e % 32;
          const int want = ((block.ql[64 * h + l + 32 * (k % 2)] >> (4 * (k / 2))) & 15) |
                           (((block.qh[32 * h + l] >> (2 * k)) & 3) << 4);
          const int sub = e / 32, i = e % 32, half = i / 16, u = (i % 16) / 4, j = i % 4;
          const uint8_t* quads = at + ggl::q6_k_r8::kQuants + sub * ggl::q6_k_r8::kSubBlockBytes;
          const int low = (quads[(u * 8 + r) * 4 + j] >> (4 * half)) & 15;
          const int top = (quads[((4 + half) * 8 + r) * 4 + j] >> (2 * u)) & 3;
          ASSERT_EQ(low | (top << 4), want) << "row " << r << " element " << e;
        }
      }
    }
  const size_t group = 8 * ggl::row_bytes(Type::Q6_K, n);
  for (int64_t g = 0; g < rows / 8; ++g)
    ggl::deinterleave_group(ggl::kQ6_K_R8, mixed.data() + g * group, back.data() + g * group, n);
  EXPECT_EQ(back, plain);
}

TEST(Interleave, OnlyWholeGroupsOfQ4_0Q8_0AndQ6_KRowsAndNeverInFiles) {
  EXPECT_EQ(ggl::interleaved_type(Type::Q4_0, 24), ggl::kQ4_0_R8);
  EXPECT_EQ(ggl::interleaved_type(Type::Q8_0, 24), ggl::kQ8_0_R8);
  EXPECT_FALSE(ggl::interleaved_type(Type::Q4_0, 20));
  EXPECT_FALSE(ggl::interleaved_type(Type::Q8_0, 12));
  EXPECT_FALSE(ggl::interleaved_type(Type::Q4_1, 24));
  EXPECT_EQ(ggl::interleaved_type(Type::Q6_K, 24), ggl::kQ6_K_R8);
  EXPECT_FALSE(ggl::interleaved_type(Type::Q4_K, 24));
  EXPECT_EQ(ggl::plain_type(ggl::kQ4_0_R8), Type::Q4_0);
  EXPECT_EQ(ggl::plain_type(ggl::kQ8_0_R8), Type::Q8_0);
  // The GGUF reader and writer know the file types only; to core a layout is its file type's
  // blocks (core/types.h: a backend layout), and its name parses into that type.
  for (Type t : {ggl::kQ4_0_R8, ggl::kQ8_0_R8, ggl::kQ6_K_R8}) {
    EXPECT_TRUE(ggl::is_backend_layout(t));
    EXPECT_FALSE(ggl::type_traits(static_cast<uint32_t>(t)));
    EXPECT_EQ(ggl::type_from_name(ggl::type_name(t)), ggl::plain_type(t));
    EXPECT_EQ(ggl::traits(t).block_bytes, ggl::traits(ggl::plain_type(t)).block_bytes);
    std::vector<uint8_t> bytes(ggl::row_bytes(ggl::plain_type(t), 256) * 8);
    ggl::GgufWriter writer;
    EXPECT_THROW(writer.add_tensor("w", t, {256, 8}, bytes.data()), ggl::Error);
  }
}

// A CPU backend given the copies (use_prepared_weights) reads them in place of a leaf that is an
// offered matrix (its bytes, type and shape), and only there: a leaf that a view reads keeps the
// file's bytes, as does every leaf once the copies are taken back. The graph is left as it was.
TEST(Interleave, CpuBackendReadsItsCopiesInPlaceOfOfferedLeaves) {
  constexpr int64_t K = 256, N = 16;
  if (!ggl::int16_gemm().supports(ggl::kQ4_0_R8, K))
    GTEST_SKIP() << "the kernel set in use (" << ggl::cpu_kernels().isa << ") multiplies no interleaved rows";
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> values(K * N), x(K);
  for (float& v : values) v = normal(rng);
  for (float& v : x) v = normal(rng);
  std::vector<uint8_t> w(ggl::row_bytes(Type::Q4_0, K) * N);
  for (int64_t r = 0; r < N; ++r)
    ggl::quantize_row(Type::Q4_0, values.data() + r * K, w.data() + r * ggl::row_bytes(Type::Q4_0, K), K);

  ggl::CpuBackend cpu(1);
  const ggl::OfferedWeight offered[] = {{"w", Type::Q4_0, {K, N, 1, 1}, w.data(), w.size(), ggl::WeightUse::kProducts}};
  std::vector<size_t> copied;
  const auto prepared = cpu.prepare_weights(offered, [&](size_t i) { copied.push_back(i); });
  ASSERT_NE(prepared, nullptr);
  EXPECT_EQ(prepared->count(), 1u);
  EXPECT_TRUE(prepared->copied(w.data()));
  EXPECT_EQ(copied, std::vector<size_t>{0});

  // w x, with w read through a view of the leaf or the leaf itself.
  const auto product = [&](ggl::CpuBackend& backend, bool through_view) {
    ggl::Graph g;
    ggl::Tensor* leaf = g.external(Type::Q4_0, std::array<int64_t, 2>{K, N}, w.data(), "w");
    ggl::Tensor* in = g.input(Type::F32, std::array<int64_t, 2>{K, 1}, "x");
    std::memcpy(in->data, x.data(), x.size() * sizeof(float));
    ggl::Tensor* weights =
        through_view ? g.view(leaf, {K, N, 1, 1}, {leaf->nb[0], leaf->nb[1], leaf->nb[2], leaf->nb[3]}, 0) : leaf;
    ggl::Tensor* y = g.mul_mat(weights, in);
    g.mark_output(y);
    backend.compute(g);
    EXPECT_EQ(leaf->type, Type::Q4_0) << "the leaf is not the file's again";
    EXPECT_EQ(leaf->data, w.data()) << "the leaf is not the file's again";
    std::vector<float> out(N);
    backend.read(*y, out.data(), 0, out.size() * sizeof(float));
    return out;
  };
  ggl::CpuBackend file_layout(1);  // never given the copies
  const std::vector<float> want = product(file_layout, false);
  EXPECT_EQ(file_layout.repacked_leaves_read(), 0);
  cpu.use_prepared_weights(prepared);
  const std::vector<float> got = product(cpu, false);
  EXPECT_EQ(cpu.repacked_leaves_read(), 1);
  float scale = 0;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  for (int64_t r = 0; r < N; ++r) EXPECT_NEAR(got[r], want[r], 1e-5f * scale) << "row " << r;
  product(cpu, true);
  EXPECT_EQ(cpu.repacked_leaves_read(), 1) << "a leaf a view reads was rewritten";
  cpu.use_prepared_weights(nullptr);
  product(cpu, false);
  EXPECT_EQ(cpu.repacked_leaves_read(), 1);
}

const char* const kDenseModel = "fixtures/llama-gqa-tiny-f32.gguf";

// kDenseModel quantized (latte quantize) into a temporary file of the running test's own (ctest
// runs tests side by side); "" when that failed.
std::string quantized_dense_model(const std::string& quantize_args, const std::string& type_name) {
  const std::string path = ::testing::TempDir() + "latte-interleave-" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".gguf";
  const auto q =
      latte::testing::run_latte("quantize " + quantize_args + " --no-progress " +
                                (latte::testing::shared_dir() / kDenseModel).string() + " " + path + " " + type_name);
  EXPECT_EQ(q.exit_code, 0) << q.out;
  return q.exit_code == 0 ? path : "";
}

std::vector<int32_t> dense_model_tokens() {
  std::vector<int32_t> tokens =
      latte::testing::read_token_file(latte::testing::shared_dir() / "fixtures/llama-gqa-tiny-f32.tokens.txt");
  // A prompt of more columns than the interleaved layouts' panel threshold (32, op_matmul.cpp), so
  // that it goes through their panels, then decode steps through their rows.
  tokens.resize(std::min<size_t>(tokens.size(), 40));
  return tokens;
}

struct Run {
  std::vector<float> logits;
  int64_t repacked_leaves;  // leaves the CPU read rewritten in the last decode step
};

// Leaves the session's CPU backend (alone, or the last of a scheduler's) read rewritten so far.
int64_t repacked_leaves_read(latte::Session& session) {
  ggl::Backend* backend = &session.backend();
  if (auto* scheduler = dynamic_cast<ggl::Scheduler*>(backend)) backend = scheduler->backends().back();
  return dynamic_cast<const ggl::CpuBackend&>(*backend).repacked_leaves_read();
}

// The last-position logits of a prompt, then of each of `decode` single-token steps.
Run run(const latte::Model& model, const std::vector<int32_t>& tokens, int decode) {
  latte::Session session(model, {.n_ctx = 128, .n_threads = 2});
  const std::vector<int32_t> prompt(tokens.begin(), tokens.end() - decode);
  std::vector<float> out = session.eval(prompt, latte::Logits::kAll);
  int64_t read = 0;
  for (int i = 0; i < decode; ++i) {
    const int32_t t = tokens[tokens.size() - decode + i];
    read = repacked_leaves_read(session);
    const std::vector<float> step = session.eval(std::span<const int32_t>(&t, 1), latte::Logits::kLast);
    out.insert(out.end(), step.begin(), step.end());
  }
  return {out, repacked_leaves_read(session) - read};
}

// A dense model quantized to Q4_0, Q8_0 or Q6_K (attention projections, feed-forward, output
// head), loaded as repacked and as the file holds it, with every kernel set that has interleaved
// kernels: the repacked model has every Q4_0 and Q8_0 product matrix and a Q6_K output head
// rewritten, its decode steps read each of them rewritten, and both give the same logits up to
// float summation order, through the prompt's panels and the decode steps' rows. A set without
// those kernels must rewrite nothing (there the two models are one: nothing to compare); where no
// set has them (a generic-only build, NEON) the test says so as skipped. The x86 sets above the
// baseline all have them. (A dense model: on the random MoE fixtures a summation-order difference
// can flip a near-tie of the router, which the fixture tests' thresholds absorb and an equality
// check would not.)
void check_repacked_model(const std::string& quantize_args, const std::string& type_name) {
  LATTE_REQUIRE_SHARED(kDenseModel);
  const std::string path = quantized_dense_model(quantize_args, type_name);
  ASSERT_FALSE(path.empty());
  const std::vector<int32_t> tokens = dense_model_tokens();
  std::vector<std::string> compared, without;
  latte::testing::for_each_kernel_set([&](const ggl::CpuKernels& k) {
    latte::ModelOptions no_repack;
    no_repack.repack = false;
    const latte::Model plain(path, no_repack);
    const latte::Model repacked(path);
    EXPECT_EQ(plain.prepared_weights(), nullptr);
    const bool interleaves = k.int16->supports(ggl::kQ8_0_R8, ggl::kQuantBlock);
    if (std::string_view(k.isa).starts_with("avx")) {
      EXPECT_TRUE(interleaves) << "an x86 set without interleaved rows";
    }
    // What the set rewrites: its interleaved types, the Q6_K ones as the output head only.
    std::set<std::string> rewrites;
    for (const ggl::TensorInfo& t : plain.file().tensors()) {
      const auto type = ggl::interleaved_type(t.type, t.ne[1]);
      if (type && k.int16->supports(*type, t.ne[0]) && t.name != "token_embd.weight" &&
          (t.type != Type::Q6_K || t.name == "output.weight"))
        rewrites.insert(t.name);
    }
    if (!interleaves) {
      EXPECT_EQ(rewrites, std::set<std::string>{});
      EXPECT_EQ(repacked.prepared_weights(), nullptr) << "a set without interleaved kernels rewrote weights";
      without.push_back(k.isa);
      return;
    }
    ASSERT_FALSE(rewrites.empty()) << "the file has no matrix to rewrite";
    const ggl::PreparedWeights* copies = repacked.prepared_weights().get();
    ASSERT_NE(copies, nullptr);
    EXPECT_EQ(copies->count(), rewrites.size());
    for (const ggl::TensorInfo& t : repacked.file().tensors())
      EXPECT_EQ(copies->copied(t.data), rewrites.count(t.name) == 1) << t.name;
    const int decode = 6;
    const Run want = run(plain, tokens, decode), got = run(repacked, tokens, decode);
    EXPECT_EQ(want.repacked_leaves, 0);
    EXPECT_EQ(got.repacked_leaves, static_cast<int64_t>(rewrites.size())) << "the decode step read the file's layout";
    const latte::testing::LogitMetrics m =
        latte::testing::compare_logits(want.logits, got.logits, plain.hparams().n_vocab);
    std::printf("[%s %s repacked vs file layout] nrmse %.3g\n", type_name.c_str(), k.isa, m.nrmse);
    // The two orders of float sums differ by ~1e-6 of a product (the 16-bit activations' own
    // rounding moves it ~1e-3); over the decode steps the logits measured ~5e-5 apart.
    EXPECT_LT(m.nrmse, 5e-4);
    compared.push_back(k.isa);
  });
  std::remove(path.c_str());
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) {
    EXPECT_FALSE(compared.empty()) << "an AVX2 CPU ran no interleaved kernels";
  }
#endif
  if (compared.empty()) {
    std::string sets;
    for (const std::string& s : without) sets += " " + s;
    GTEST_SKIP() << "no kernel set of this build and CPU multiplies interleaved rows (ran:" << sets
                 << "): the repacked model is the file's, nothing to compare";
  }
}

TEST(Interleave, RepackedQ4_0ModelMatchesTheFileLayout) { check_repacked_model("--pure", "q4_0"); }
TEST(Interleave, RepackedQ8_0ModelMatchesTheFileLayout) { check_repacked_model("--pure", "q8_0"); }
// Q6_K everywhere but the feed-forward down matrices (rows of 704: Q8_0).
TEST(Interleave, RepackedQ6_KHeadMatchesTheFileLayout) { check_repacked_model("", "q6_k"); }

// A session that offloads some layers to a device (simulated: tests/support/simulated_device.h):
// the device is given the file's bytes of its weights, never the CPU's layout, and the
// scheduler's CPU backend reads the rewritten copies of the matrices left to it.
TEST(Interleave, OffloadingSessionGivesTheDeviceTheFileAndTheCpuItsCopies) {
  if (!ggl::int16_gemm().supports(ggl::kQ4_0_R8, ggl::kQuantBlock))
    GTEST_SKIP() << "the kernel set in use (" << ggl::cpu_kernels().isa << ") multiplies no interleaved rows";
  LATTE_REQUIRE_SHARED(kDenseModel);
  const std::string path = quantized_dense_model("--pure", "q4_0");
  ASSERT_FALSE(path.empty());
  const latte::Model model(path);
  ASSERT_NE(model.prepared_weights(), nullptr);
  latte::testing::SimulatedDevice* device = nullptr;
  latte::SessionOptions o{.n_ctx = 128, .n_threads = 2};
  o.placement = latte::PlacementRequest{};
  o.placement->gpu_layers = 1;  // the last layer
  o.devices = [&device] {
    std::vector<std::unique_ptr<ggl::Backend>> list;
    auto d = std::make_unique<latte::testing::SimulatedDevice>();
    device = d.get();
    list.push_back(std::move(d));
    return list;
  };
  latte::Session offloading(model, o);
  ASSERT_NE(device, nullptr);
  ASSERT_NE(offloading.offload(), nullptr);

  // The device holds the file's bytes of the weights placed there; the CPU rewrote the others'.
  const std::set<std::string> on_device = latte::gpu_tensor_names(offloading.offload()->placement);
  std::map<std::string, const ggl::TensorInfo*> file;
  for (const ggl::TensorInfo& t : model.file().tensors()) file[t.name] = &t;
  int64_t cpu_copies = 0;
  latte::ModelWeights w = offloading.weights();
  latte::for_each_weight(w, [&](latte::WeightRef& t) {
    if (!t) return;
    const ggl::TensorInfo& in_file = *file.at(t->name);
    if (device->holds(t->data)) {
      EXPECT_EQ(t->type, in_file.type) << t->name;
      EXPECT_EQ(std::memcmp(t->data, in_file.data, in_file.nbytes), 0) << t->name << ": not the file's bytes";
    } else {
      cpu_copies += model.prepared_weights()->copied(t->data);
    }
  });
  ASSERT_GT(cpu_copies, 0) << "the placement left the CPU no rewritten matrix";
  EXPECT_LT(cpu_copies, static_cast<int64_t>(model.prepared_weights()->count())) << "the device holds none";

  const std::vector<int32_t> tokens = dense_model_tokens();
  const std::span<const int32_t> all(tokens);
  std::vector<float> got = offloading.eval(all.first(tokens.size() - 1));
  const int64_t read = repacked_leaves_read(offloading);
  const std::vector<float> step = offloading.eval(all.last(1));
  got.insert(got.end(), step.begin(), step.end());
  EXPECT_EQ(repacked_leaves_read(offloading) - read, cpu_copies)
      << "the CPU parts of the decode step read the file's layout";

  latte::Session cpu_only(model, {.n_ctx = 128, .n_threads = 2});
  std::vector<float> want = cpu_only.eval(all.first(tokens.size() - 1));
  const std::vector<float> want_step = cpu_only.eval(all.last(1));
  want.insert(want.end(), want_step.begin(), want_step.end());
  // The device's layers read the file's layout, the CPU-only session's the interleaved one: float
  // summation order apart (check_repacked_model).
  EXPECT_LT(latte::testing::compare_logits(want, got, model.hparams().n_vocab).nrmse, 5e-4);
  std::remove(path.c_str());
}

// --no-repack (llama.cpp's -nr) is accepted by the commands that load a model.
TEST(Interleave, NoRepackFlagIsAccepted) {
  for (const char* flag : {"--no-repack", "-nr"}) {
    const auto r = latte::testing::run_latte(std::string("run -n 2 -p hi --temp 0 ") + flag);
    EXPECT_EQ(r.exit_code, 0) << r.out;
  }
}

}  // namespace test_interleave
