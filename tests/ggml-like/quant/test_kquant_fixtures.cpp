// Known answers 1 and 2 of ../shared/fixtures/kquant/README.md: every tensor of llama.cpp's
// kq-tiny-TYPE.gguf files is our quantizer's output on the F32 file's tensor (same bytes), and our
// dequantization of them is the model behind the exact logits (an F32 forward pass on the
// dequantized weights matches kq-tiny-TYPE.exact-logits.f32 to the F32 bound, nrmse <= 1e-3).
// Known answer 3 (forward on the quantized files) is part of test_forward_fixtures.cpp's table.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

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

std::string kq_path(const std::string& suffix) { return "fixtures/kquant/kq-tiny-" + suffix; }

class KquantFile : public ::testing::TestWithParam<const char*> {};

// Known answer 1: each tensor, quantized from the F32 file to the type the reference gave it.
TEST_P(KquantFile, QuantizerReproducesEveryTensorByteForByte) {
  LATTE_REQUIRE_SHARED(kq_path("f32.gguf"));
  LATTE_REQUIRE_SHARED(kq_path(std::string(GetParam()) + ".gguf"));
  const auto dir = latte::testing::shared_dir();
  const ggl::GgufFile f32((dir / kq_path("f32.gguf")).string());
  const ggl::GgufFile quant((dir / kq_path(std::string(GetParam()) + ".gguf")).string());
  ASSERT_EQ(f32.tensors().size(), quant.tensors().size());

  std::map<std::string, std::pair<int, int>> per_type;  // type -> (identical, tensors)
  for (const ggl::TensorInfo& q : quant.tensors()) {
    SCOPED_TRACE(q.name);
    const ggl::TensorInfo* src = f32.find_tensor(q.name);
    ASSERT_NE(src, nullptr) << "missing in the F32 file";
    ASSERT_EQ(src->type, Type::F32);
    for (int d = 0; d < ggl::kMaxDims; ++d) ASSERT_EQ(src->ne[d], q.ne[d]);
    ASSERT_TRUE(ggl::is_weight_type(q.type)) << ggl::type_name(q.type);

    const latte::testing::BlockComparison c = latte::testing::quantize_and_compare(*src, q);
    EXPECT_EQ(c.differing, 0u) << ggl::type_name(q.type) << ": blocks differ; first is block " << c.first << " of "
                               << c.blocks;
    auto& [same, total] = per_type[std::string(ggl::type_name(q.type))];
    same += c.differing == 0;
    ++total;
  }
  std::printf("[bytes] kq-tiny-%-7s", GetParam());
  for (const auto& [type, counts] : per_type) std::printf(" %s %d/%d", type.c_str(), counts.first, counts.second);
  std::printf("\n");
}

// Known answer 2: the quantized file's tensors, dequantized into an F32 file, run in F32.
TEST_P(KquantFile, DequantizedWeightsGiveTheExactLogits) {
  const std::string quant_name = kq_path(std::string(GetParam()) + ".gguf");
  const std::string exact_name = kq_path(std::string(GetParam()) + ".exact-logits.f32");
  LATTE_REQUIRE_SHARED(quant_name);
  LATTE_REQUIRE_SHARED(exact_name);
  LATTE_REQUIRE_SHARED("fixtures/kquant/kq-tiny.tokens.txt");
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
                    ("latte-kq-dequant-" + std::string(GetParam()) + "-" + std::to_string(::getpid()) + ".gguf");
  writer.write(path.string());

  const auto tokens = latte::testing::read_token_file(dir / "fixtures/kquant/kq-tiny.tokens.txt");
  const auto exact = latte::testing::read_f32_file(dir / exact_name);
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
  const auto m = latte::testing::compare_logits(exact, logits, static_cast<size_t>(n_vocab));
  std::printf("[metrics] kq-tiny-%-7s dequantized F32: nrmse=%.3e mean_kl=%.3e max_kl=%.3e top1=%.3f\n", GetParam(),
              m.nrmse, m.mean_kl, m.max_kl, m.top1);
  EXPECT_LE(m.nrmse, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(KquantFixtures, KquantFile, ::testing::ValuesIn(kFiles),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace test_kquant_fixtures
