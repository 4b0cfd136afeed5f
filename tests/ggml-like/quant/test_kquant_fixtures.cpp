// Known answers 1 and 2 of ../shared/fixtures/kquant/README.md and ../shared/fixtures/iquant/README.md:
// every tensor of llama.cpp's kq-tiny-TYPE.gguf files is our quantizer's output on the F32 file's
// tensor (same bytes; the i-quant files were made with kq-tiny.imatrix.dat, so their tensors are
// quantized with its weights), and our dequantization of them is the model behind the exact logits
// (an F32 forward pass on the dequantized weights matches kq-tiny-TYPE.exact-logits.f32 to the F32
// bound, nrmse <= 1e-3). Known answer 3 (forward on the quantized files) is part of
// test_forward_fixtures.cpp's table.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "convert/imatrix.h"
#include "ggml-like/gguf/gguf.h"
#include "ggml-like/quant/quant.h"
#include "src/runtime/session.h"
#include "tests/support/logit_metrics.h"
#include "tests/support/quant_fixture_util.h"
#include "tests/support/test_support.h"

namespace test_kquant_fixtures {

using ggl::Type;

const char* const kFiles[] = {"q2_k", "q3_k_m", "q4_k_s", "q4_k_m", "q5_k_m",
                              "q6_k", "iq4_xs", "iq4_nl", "q5_0",   "q5_1"};
// The i-quant files: some also hold IQ3_XXS / IQ3_S tensors, which must be computed too.
const char* const kIquantFiles[] = {"iq1_s", "iq1_m",   "iq2_xxs", "iq2_xs", "iq2_s",
                                    "iq2_m", "iq3_xxs", "iq3_xs",  "iq3_s",  "iq3_m"};

const std::string kF32 = "fixtures/kquant/kq-tiny-f32.gguf";
const std::string kTokens = "fixtures/kquant/kq-tiny.tokens.txt";
const std::string kImatrix = "fixtures/iquant/kq-tiny.imatrix.dat";

std::string kq_path(const std::string& suffix) { return "fixtures/kquant/kq-tiny-" + suffix; }
std::string iq_path(const std::string& suffix) { return "fixtures/iquant/kq-tiny-" + suffix; }

// Fails (never skips) where the file holds a tensor type latte does not compute: the i-quant
// files are checked whole, whichever of their types a build lacks.
void expect_every_type_computed(const ggl::GgufFile& f, const std::string& name) {
  for (const ggl::TensorInfo& t : f.tensors())
    EXPECT_TRUE(ggl::is_weight_type(t.type))
        << name << ": tensor " << t.name << " has type " << ggl::type_name(t.type) << ", which latte does not compute";
}

// Known answer 1: each tensor of `quant_name`, quantized from the F32 file to the type the
// reference gave it, with the importance matrix's weights for it where there is one.
void expect_tensors_reproduced(const std::string& quant_name, const latte::convert::ImportanceMatrix* imatrix) {
  LATTE_REQUIRE_SHARED(kF32);
  LATTE_REQUIRE_SHARED(quant_name);
  const auto dir = latte::testing::shared_dir();
  const ggl::GgufFile f32((dir / kF32).string());
  const ggl::GgufFile quant((dir / quant_name).string());
  ASSERT_EQ(f32.tensors().size(), quant.tensors().size());
  expect_every_type_computed(quant, quant_name);

  std::map<std::string, std::pair<int, int>> per_type;  // type -> (identical, tensors)
  for (const ggl::TensorInfo& q : quant.tensors()) {
    SCOPED_TRACE(q.name);
    const ggl::TensorInfo* src = f32.find_tensor(q.name);
    ASSERT_NE(src, nullptr) << "missing in the F32 file";
    ASSERT_EQ(src->type, Type::F32);
    for (int d = 0; d < ggl::kMaxDims; ++d) ASSERT_EQ(src->ne[d], q.ne[d]);
    if (!ggl::is_weight_type(q.type)) continue;  // reported above

    const std::vector<float>* importance = imatrix ? imatrix->find(q.name) : nullptr;
    if (importance) {
      ASSERT_EQ(static_cast<int64_t>(importance->size()), q.ne[0] * q.ne[2] * q.ne[3]);
    }
    const latte::testing::BlockComparison c =
        latte::testing::quantize_and_compare(*src, q, importance ? importance->data() : nullptr);
    EXPECT_EQ(c.differing, 0u) << ggl::type_name(q.type) << ": blocks differ; first is block " << c.first << " of "
                               << c.blocks;
    auto& [same, total] = per_type[std::string(ggl::type_name(q.type))];
    same += c.differing == 0;
    ++total;
  }
  std::printf("[bytes] %-28s", std::filesystem::path(quant_name).filename().c_str());
  for (const auto& [type, counts] : per_type) std::printf(" %s %d/%d", type.c_str(), counts.first, counts.second);
  std::printf("\n");
}

// Known answer 2: the quantized file's tensors, dequantized into an F32 file, run in F32.
// near_tie_positions: positions left out of the metrics, where the reference's MoE routing is a
// near-tie (test_forward_fixtures.cpp lists them too and checks that they are).
void expect_dequantized_exact(const std::string& quant_name, const std::string& exact_name,
                              const std::vector<size_t>& near_tie_positions = {}) {
  LATTE_REQUIRE_SHARED(quant_name);
  LATTE_REQUIRE_SHARED(exact_name);
  LATTE_REQUIRE_SHARED(kTokens);
  const auto dir = latte::testing::shared_dir();
  const ggl::GgufFile quant((dir / quant_name).string());
  expect_every_type_computed(quant, quant_name);
  if (::testing::Test::HasFailure()) return;

  ggl::GgufWriter writer(static_cast<uint32_t>(quant.alignment()));
  for (const auto& [key, value] : quant.metadata().entries()) writer.metadata().set(key, value);
  writer.metadata().set("general.file_type", ggl::Value{uint32_t{0}});  // LLAMA_FTYPE_ALL_F32
  for (const ggl::TensorInfo& t : quant.tensors()) {
    writer.add_tensor(t.name, Type::F32, std::vector<int64_t>(t.ne, t.ne + t.n_dims), [&t](uint8_t* dst, size_t) {
      const int64_t n = t.ne[0];
      const size_t in_row = ggl::row_bytes(t.type, n);
      for (int64_t r = 0; r < t.n_elements() / n; ++r)
        ggl::dequantize_row(t.type, t.data + r * in_row, reinterpret_cast<float*>(dst) + r * n, n);
    });
  }
  const std::string stem = std::filesystem::path(quant_name).stem().string();
  const auto path =
      std::filesystem::temp_directory_path() / ("latte-dequant-" + stem + "-" + std::to_string(::getpid()) + ".gguf");
  writer.write(path.string());

  const auto tokens = latte::testing::read_token_file(dir / kTokens);
  auto exact = latte::testing::read_f32_file(dir / exact_name);
  std::vector<float> logits;
  int64_t n_vocab = 0;
  {
    const latte::Model model(path.string());
    n_vocab = model.hparams().n_vocab;
    latte::SessionOptions o;
    o.cache_type = Type::F32;
    o.n_ctx = static_cast<int64_t>(tokens.size());
    o.n_threads = 1;
    latte::Session s(model, o);
    logits = s.eval(tokens);
  }
  std::filesystem::remove(path);
  ASSERT_EQ(logits.size(), tokens.size() * static_cast<size_t>(n_vocab));
  ASSERT_EQ(exact.size(), logits.size());
  for (auto it = near_tie_positions.rbegin(); it != near_tie_positions.rend(); ++it) {
    const auto at = static_cast<std::ptrdiff_t>(*it * static_cast<size_t>(n_vocab));
    exact.erase(exact.begin() + at, exact.begin() + at + n_vocab);
    logits.erase(logits.begin() + at, logits.begin() + at + n_vocab);
  }
  const auto m = latte::testing::compare_logits(exact, logits, static_cast<size_t>(n_vocab));
  std::printf("[metrics] %-18s dequantized F32: nrmse=%.3e mean_kl=%.3e max_kl=%.3e top1=%.3f\n", stem.c_str(), m.nrmse,
              m.mean_kl, m.max_kl, m.top1);
  EXPECT_LE(m.nrmse, 1e-3);
}

class KquantFile : public ::testing::TestWithParam<const char*> {};

TEST_P(KquantFile, QuantizerReproducesEveryTensorByteForByte) {
  expect_tensors_reproduced(kq_path(std::string(GetParam()) + ".gguf"), nullptr);
}

TEST_P(KquantFile, DequantizedWeightsGiveTheExactLogits) {
  expect_dequantized_exact(kq_path(std::string(GetParam()) + ".gguf"),
                           kq_path(std::string(GetParam()) + ".exact-logits.f32"));
}

INSTANTIATE_TEST_SUITE_P(KquantFixtures, KquantFile, ::testing::ValuesIn(kFiles),
                         [](const auto& info) { return std::string(info.param); });

class IquantFile : public ::testing::TestWithParam<const char*> {};

TEST_P(IquantFile, QuantizerWithTheImatrixReproducesEveryTensorByteForByte) {
  LATTE_REQUIRE_SHARED(kImatrix);
  const auto imatrix = latte::convert::ImportanceMatrix::load((latte::testing::shared_dir() / kImatrix).string());
  expect_tensors_reproduced(iq_path(std::string(GetParam()) + ".gguf"), &imatrix);
}

TEST_P(IquantFile, DequantizedWeightsGiveTheExactLogits) {
  // kq-tiny-iq3_s: position 1's routing is a near-tie (test_forward_fixtures.cpp).
  const std::vector<size_t> near_ties =
      std::string(GetParam()) == "iq3_s" ? std::vector<size_t>{1} : std::vector<size_t>{};
  expect_dequantized_exact(iq_path(std::string(GetParam()) + ".gguf"),
                           iq_path(std::string(GetParam()) + ".exact-logits.f32"), near_ties);
}

INSTANTIATE_TEST_SUITE_P(IquantFixtures, IquantFile, ::testing::ValuesIn(kIquantFiles),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace test_kquant_fixtures
