// Known answers 1 and 2 of ../shared/fixtures/kquant/README.md and ../shared/fixtures/iquant/README.md:
// every tensor of llama.cpp's kq-tiny-TYPE.gguf files is our quantizer's output on the F32 file's
// tensor (same bytes; the iquant files with the importance matrix kq-tiny.imatrix.dat, as they were
// made), and our dequantization of them is the model behind the exact logits (an F32 forward pass
// on the dequantized weights matches kq-tiny-TYPE.exact-logits.f32 to the F32 bound, nrmse <= 1e-3).
// Known answer 3 (forward on the quantized files) is part of test_forward_fixtures.cpp's table.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
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

// The IQ3 files of fixtures/iquant (IQ3_XXS, IQ3_S and their companions).
const char* const kIquantIq3Files[] = {"iq3_xxs", "iq3_xs", "iq3_s", "iq3_m"};

const std::string kF32File = "fixtures/kquant/kq-tiny-f32.gguf";
const std::string kTokensFile = "fixtures/kquant/kq-tiny.tokens.txt";
const std::string kImatrixFile = "fixtures/iquant/kq-tiny.imatrix.dat";

std::string kq_path(const std::string& suffix) { return "fixtures/kquant/kq-tiny-" + suffix; }
std::string iq_path(const std::string& suffix) { return "fixtures/iquant/kq-tiny-" + suffix; }

// Known answer 1: each tensor of quant_name, quantized from the F32 file to the type the reference
// gave it (with the importance matrix's entry for it, when given one).
void expect_every_tensor_reproduced(const std::string& label, const std::string& quant_name,
                                    const latte::convert::ImportanceMatrix* imatrix) {
  const auto dir = latte::testing::shared_dir();
  const ggl::GgufFile f32((dir / kF32File).string());
  const ggl::GgufFile quant((dir / quant_name).string());
  ASSERT_EQ(f32.tensors().size(), quant.tensors().size());

  std::map<std::string, std::pair<int, int>> per_type;  // type -> (identical, tensors)
  for (const ggl::TensorInfo& q : quant.tensors()) {
    SCOPED_TRACE(q.name);
    const ggl::TensorInfo* src = f32.find_tensor(q.name);
    ASSERT_NE(src, nullptr) << "missing in the F32 file";
    ASSERT_EQ(src->type, Type::F32);
    for (int d = 0; d < ggl::kMaxDims; ++d) ASSERT_EQ(src->ne[d], q.ne[d]);
    ASSERT_TRUE(ggl::is_weight_type(q.type)) << ggl::type_name(q.type);

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
  std::printf("[bytes] kq-tiny-%-7s", label.c_str());
  for (const auto& [type, counts] : per_type) std::printf(" %s %d/%d", type.c_str(), counts.first, counts.second);
  std::printf("\n");
}

// Known answer 2: the quantized file's tensors, dequantized into an F32 file, run in F32.
// near_tie_positions: positions left out of the metrics, where the reference's MoE routing is a
// near-tie (test_forward_fixtures.cpp lists them too and checks that they are).
void expect_dequantized_gives_exact_logits(const std::string& label, const std::string& quant_name,
                                           const std::string& exact_name,
                                           const std::vector<size_t>& near_tie_positions = {}) {
  const auto dir = latte::testing::shared_dir();
  const ggl::GgufFile quant((dir / quant_name).string());

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
  const auto path = std::filesystem::temp_directory_path() /
                    ("latte-kq-dequant-" + label + "-" + std::to_string(::getpid()) + ".gguf");
  writer.write(path.string());

  const auto tokens = latte::testing::read_token_file(dir / kTokensFile);
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
  std::printf("[metrics] kq-tiny-%-7s dequantized F32: nrmse=%.3e mean_kl=%.3e max_kl=%.3e top1=%.3f\n", label.c_str(),
              m.nrmse, m.mean_kl, m.max_kl, m.top1);
  EXPECT_LE(m.nrmse, 1e-3);
}

class KquantFile : public ::testing::TestWithParam<const char*> {};

TEST_P(KquantFile, QuantizerReproducesEveryTensorByteForByte) {
  LATTE_REQUIRE_SHARED(kF32File);
  LATTE_REQUIRE_SHARED(kq_path(std::string(GetParam()) + ".gguf"));
  expect_every_tensor_reproduced(GetParam(), kq_path(std::string(GetParam()) + ".gguf"), nullptr);
}

TEST_P(KquantFile, DequantizedWeightsGiveTheExactLogits) {
  const std::string quant_name = kq_path(std::string(GetParam()) + ".gguf");
  const std::string exact_name = kq_path(std::string(GetParam()) + ".exact-logits.f32");
  LATTE_REQUIRE_SHARED(quant_name);
  LATTE_REQUIRE_SHARED(exact_name);
  LATTE_REQUIRE_SHARED(kTokensFile);
  expect_dequantized_gives_exact_logits(GetParam(), quant_name, exact_name);
}

INSTANTIATE_TEST_SUITE_P(KquantFixtures, KquantFile, ::testing::ValuesIn(kFiles),
                         [](const auto& info) { return std::string(info.param); });

// The iquant files were made with an importance matrix; a file holding a type this build lacks is
// skipped, naming it.
class IquantFile : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    LATTE_REQUIRE_SHARED(quant_name());
    const ggl::GgufFile quant((latte::testing::shared_dir() / quant_name()).string());
    std::set<std::string> missing;
    for (const ggl::TensorInfo& t : quant.tensors())
      if (!ggl::is_weight_type(t.type)) missing.insert(std::string(ggl::type_name(t.type)));
    std::string names;
    for (const std::string& m : missing) names += (names.empty() ? "" : ", ") + m;
    if (!names.empty()) GTEST_SKIP() << quant_name() << " holds tensors of " << names << ", not weight types here";
  }
  std::string quant_name() const { return iq_path(std::string(GetParam()) + ".gguf"); }
};

TEST_P(IquantFile, QuantizerReproducesEveryTensorByteForByte) {
  LATTE_REQUIRE_SHARED(kF32File);
  LATTE_REQUIRE_SHARED(kImatrixFile);
  const auto imatrix = latte::convert::ImportanceMatrix::load((latte::testing::shared_dir() / kImatrixFile).string());
  expect_every_tensor_reproduced(GetParam(), quant_name(), &imatrix);
}

TEST_P(IquantFile, DequantizedWeightsGiveTheExactLogits) {
  const std::string exact_name = iq_path(std::string(GetParam()) + ".exact-logits.f32");
  LATTE_REQUIRE_SHARED(exact_name);
  LATTE_REQUIRE_SHARED(kTokensFile);
  // kq-tiny-iq3_s: position 1's routing is a near-tie (test_forward_fixtures.cpp).
  const std::vector<size_t> near_ties =
      std::string(GetParam()) == "iq3_s" ? std::vector<size_t>{1} : std::vector<size_t>{};
  expect_dequantized_gives_exact_logits(GetParam(), quant_name(), exact_name, near_ties);
}

INSTANTIATE_TEST_SUITE_P(IquantIq3Fixtures, IquantFile, ::testing::ValuesIn(kIquantIq3Files),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace test_kquant_fixtures
