// `latte quantize` through the binary: the reference quantizer's known answers byte for byte,
// metadata kept, the per-tensor options, the refusals.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "ggml-like/gguf/gguf.h"
#include "ggml-like/quant/quant.h"
#include "tests/support/convert_support.h"
#include "tests/support/test_support.h"

namespace test_quantize_cli {

using namespace latte::convert_test;
using latte::testing::run_latte;
using latte::testing::shared_dir;

const char* kF32 = "fixtures/ds2-v2-tiny-f32.gguf";

std::string q(const fs::path& p) { return latte::testing::shell_quoted(p); }

fs::path quantize(const fs::path& in, const std::string& type, const std::string& extra, const std::string& name) {
  const fs::path out = fs::path(::testing::TempDir()) / name;
  fs::remove(out);
  auto r = run_latte("quantize " + q(in) + " " + q(out) + " " + type + " " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("wrote " + out.string()), std::string::npos) << r.out;
  return out;
}

const ggl::TensorInfo& tensor(const ggl::GgufFile& f, const std::string& name) {
  const ggl::TensorInfo* t = f.find_tensor(name);
  if (!t) throw std::runtime_error(f.path() + ": no tensor " + name);
  return *t;
}

bool same_bytes(const ggl::TensorInfo& a, const ggl::TensorInfo& b) {
  return a.type == b.type && a.nbytes == b.nbytes && std::memcmp(a.data, b.data, a.nbytes) == 0;
}

// Quantizing an F32 fixture reproduces the reference quantizer's files tensor for tensor (type and
// bytes), and keeps the input's metadata, with general.file_type updated.
void expect_known_answer(const std::string& input, const std::string& type, const std::string& reference,
                         uint32_t file_type, const std::string& flags = "") {
  const fs::path out = quantize(shared_dir() / input, type, flags + " --no-progress",
                                fs::path(reference).stem().string() + "-latte.gguf");
  ggl::GgufFile got(out.string()), ref((shared_dir() / reference).string()), in((shared_dir() / input).string());
  ASSERT_EQ(got.tensors().size(), ref.tensors().size());
  for (const ggl::TensorInfo& t : ref.tensors()) {
    const ggl::TensorInfo& g = tensor(got, t.name);
    EXPECT_EQ(std::vector<int64_t>(g.ne, g.ne + g.n_dims), std::vector<int64_t>(t.ne, t.ne + t.n_dims)) << t.name;
    EXPECT_EQ(ggl::type_name(g.type), ggl::type_name(t.type)) << t.name;
    EXPECT_TRUE(same_bytes(g, t)) << t.name << ": differs from " << reference;
  }
  // Tensor order is the input's.
  for (size_t i = 0; i < in.tensors().size(); ++i) EXPECT_EQ(got.tensors()[i].name, in.tensors()[i].name);
  for (const auto& [key, value] : in.metadata().entries()) {
    if (key == "general.file_type") continue;
    ASSERT_TRUE(got.metadata().has(key)) << key;
    EXPECT_TRUE(same_value(got.metadata().at(key), value)) << key;
  }
  EXPECT_EQ(got.metadata().get<uint32_t>("general.file_type"), file_type);
  EXPECT_EQ(got.metadata().get<uint32_t>("general.quantization_version"), 2u);
}

TEST(QuantizeCli, Q8_0ReproducesReferenceFileByteForByte) {
  LATTE_REQUIRE_SHARED(kF32);
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q8_0.gguf");
  expect_known_answer(kF32, "q8_0", "fixtures/ds2-v2-tiny-q8_0.gguf", 7);
}

TEST(QuantizeCli, Q4_0ReproducesReferenceFileByteForByte) {
  LATTE_REQUIRE_SHARED(kF32);
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q4_0.gguf");
  // The fixture has every weight in Q4_0 (llama.cpp's q4_0 mix would put output.weight in Q8_0).
  expect_known_answer(kF32, "q4_0", "fixtures/ds2-v2-tiny-q4_0.gguf", 2, "--pure");
}

// Known answer 1 of fixtures/kquant: llama.cpp's ten file types of the same model, each tensor in
// the same type with the same bytes, general.file_type its LLAMA_FTYPE.
class QuantizeKquant : public ::testing::TestWithParam<std::pair<const char*, uint32_t>> {};

TEST_P(QuantizeKquant, ReproducesTheReferenceFileTensorForTensor) {
  const auto [type, file_type] = GetParam();
  const std::string input = "fixtures/kquant/kq-tiny-f32.gguf";
  const std::string reference = std::string("fixtures/kquant/kq-tiny-") + type + ".gguf";
  LATTE_REQUIRE_SHARED(input);
  LATTE_REQUIRE_SHARED(reference);
  std::string upper = type;  // llama.cpp spells them in capitals; either works
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  expect_known_answer(input, upper, reference, file_type);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, QuantizeKquant,
                         ::testing::Values(std::pair{"q2_k", 10u}, std::pair{"q3_k_m", 12u}, std::pair{"q4_k_s", 14u},
                                           std::pair{"q4_k_m", 15u}, std::pair{"q5_k_m", 17u}, std::pair{"q6_k", 18u},
                                           std::pair{"iq4_xs", 30u}, std::pair{"iq4_nl", 25u}, std::pair{"q5_0", 8u},
                                           std::pair{"q5_1", 9u}),
                         [](const auto& info) { return std::string(info.param.first); });

// Known answer 1 of fixtures/iquant: the ten i-quant file types below 4 bits, quantized with the
// importance matrix they were made with. A file holding a type this build has no quantizer for is
// skipped, naming the type.
class QuantizeIquant : public ::testing::TestWithParam<std::pair<const char*, uint32_t>> {};

TEST_P(QuantizeIquant, ReproducesTheReferenceFileTensorForTensor) {
  const auto [type, file_type] = GetParam();
  const std::string input = "fixtures/kquant/kq-tiny-f32.gguf";
  const std::string imatrix = "fixtures/iquant/kq-tiny.imatrix.dat";
  const std::string reference = std::string("fixtures/iquant/kq-tiny-") + type + ".gguf";
  LATTE_REQUIRE_SHARED(input);
  LATTE_REQUIRE_SHARED(imatrix);
  LATTE_REQUIRE_SHARED(reference);
  std::set<std::string> missing;
  const ggl::GgufFile ref((shared_dir() / reference).string());
  for (const ggl::TensorInfo& t : ref.tensors())
    if (!ggl::is_weight_type(t.type)) missing.insert(std::string(ggl::type_name(t.type)));
  std::string names;
  for (const std::string& m : missing) names += (names.empty() ? "" : ", ") + m;
  if (!names.empty()) GTEST_SKIP() << reference << " holds tensors of " << names << ": no quantizer here";
  expect_known_answer(input, type, reference, file_type, "--imatrix " + q(shared_dir() / imatrix));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, QuantizeIquant,
                         ::testing::Values(std::pair{"iq1_s", 24u}, std::pair{"iq1_m", 31u}, std::pair{"iq2_xxs", 19u},
                                           std::pair{"iq2_xs", 20u}, std::pair{"iq2_s", 28u}, std::pair{"iq2_m", 29u},
                                           std::pair{"iq3_xxs", 23u}, std::pair{"iq3_xs", 22u}, std::pair{"iq3_s", 26u},
                                           std::pair{"iq3_m", 27u}),
                         [](const auto& info) { return std::string(info.param.first); });

TEST(QuantizeCli, TensorRules) {
  LATTE_REQUIRE_SHARED(kF32);
  ggl::GgufFile in((shared_dir() / kF32).string());
  for (const char* type : {"f16", "bf16", "q4_1"}) {
    ggl::GgufFile got(quantize(shared_dir() / kF32, type, "--pure", std::string("rules-") + type + ".gguf").string());
    const ggl::Type want = *ggl::type_from_name(type);
    for (const ggl::TensorInfo& t : got.tensors()) {
      const bool stays_f32 = t.n_dims == 1 || t.name.find("ffn_gate_inp") != std::string::npos;
      EXPECT_EQ(t.type, stays_f32 ? ggl::Type::F32 : want) << type << " " << t.name;
      if (stays_f32) {
        EXPECT_TRUE(same_bytes(t, tensor(in, t.name))) << t.name;
      }
    }
  }
}

TEST(QuantizeCli, LeaveOutputTensorAndTokenEmbeddingType) {
  LATTE_REQUIRE_SHARED(kF32);
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q8_0.gguf");
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q4_0.gguf");
  ggl::GgufFile got(
      quantize(shared_dir() / kF32, "q4_0", "--leave-output-tensor --token-embedding-type q8_0", "mixed.gguf")
          .string());
  ggl::GgufFile in((shared_dir() / kF32).string());
  ggl::GgufFile q8((shared_dir() / "fixtures/ds2-v2-tiny-q8_0.gguf").string());
  ggl::GgufFile q4((shared_dir() / "fixtures/ds2-v2-tiny-q4_0.gguf").string());
  EXPECT_TRUE(same_bytes(tensor(got, "output.weight"), tensor(in, "output.weight")));
  EXPECT_TRUE(same_bytes(tensor(got, "token_embd.weight"), tensor(q8, "token_embd.weight")));
  EXPECT_TRUE(same_bytes(tensor(got, "blk.0.attn_q_b.weight"), tensor(q4, "blk.0.attn_q_b.weight")));
}

TEST(QuantizeCli, RequantizingNeedsPermission) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-q8_0.gguf");
  const fs::path in = shared_dir() / "fixtures/ds2-v2-tiny-q8_0.gguf";
  const fs::path dir = fresh_dir("requant");
  auto r = run_latte("quantize " + q(in) + " " + q(dir / "x.gguf") + " q4_0");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("is already q8_0; pass --allow-requantize"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(dir));
  // Permitted: every weight is the Q4_0 of its dequantized Q8_0 values.
  ggl::GgufFile got(quantize(in, "q4_0", "--allow-requantize", "requant.gguf").string());
  ggl::GgufFile src(in.string());
  const ggl::TensorInfo& a = tensor(src, "blk.0.ffn_up.weight");
  const ggl::TensorInfo& b = tensor(got, "blk.0.ffn_up.weight");
  ASSERT_EQ(b.type, ggl::Type::Q4_0);
  std::vector<float> row(static_cast<size_t>(a.ne[0]));
  std::vector<uint8_t> expect(ggl::row_bytes(ggl::Type::Q4_0, a.ne[0]));
  for (int64_t r2 = 0; r2 < a.ne[1]; ++r2) {
    ggl::dequantize_row(a.type, a.data + r2 * ggl::row_bytes(a.type, a.ne[0]), row.data(), a.ne[0]);
    ggl::quantize_row(ggl::Type::Q4_0, row.data(), expect.data(), a.ne[0]);
    ASSERT_EQ(std::memcmp(expect.data(), b.data + r2 * expect.size(), expect.size()), 0) << "row " << r2;
  }
  // Same type in and out: the bytes are copied, no permission needed.
  ggl::GgufFile same(quantize(in, "q8_0", "", "same.gguf").string());
  for (const ggl::TensorInfo& t : src.tensors()) EXPECT_TRUE(same_bytes(tensor(same, t.name), t)) << t.name;
}

// A tiny GGUF with one weight whose rows (48) are not a multiple of the 32-weight blocks.
fs::path odd_rows_file() {
  const fs::path path = fresh_dir("odd") / "odd.gguf";
  ggl::GgufWriter w;
  w.metadata().set("general.architecture", ggl::Value{std::string("llama")});
  w.metadata().set("general.file_type", ggl::Value{uint32_t{0}});
  static std::vector<float> a(48 * 4), b(64 * 4), n(64);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(static_cast<float>(i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(static_cast<float>(i));
  for (size_t i = 0; i < n.size(); ++i) n[i] = 1.0f + 0.01f * static_cast<float>(i);
  w.add_tensor("blk.0.attn_odd.weight", ggl::Type::F32, {48, 4}, a.data());
  w.add_tensor("blk.0.ffn_up.weight", ggl::Type::F32, {64, 4}, b.data());
  w.add_tensor("blk.0.attn_norm.weight", ggl::Type::F32, {64}, n.data());
  w.write(path.string());
  return path;
}

TEST(QuantizeCli, OddRowsFallBackToF16WithNoticeOrFailWithPure) {
  const fs::path in = odd_rows_file();
  const fs::path out = in.parent_path() / "out.gguf";
  auto r = run_latte("quantize " + q(in) + " " + q(out) + " q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("notice: blk.0.attn_odd.weight: rows of 48 are not a multiple of 32, stored as f16"),
            std::string::npos)
      << r.out;
  ggl::GgufFile got(out.string());
  EXPECT_EQ(tensor(got, "blk.0.attn_odd.weight").type, ggl::Type::F16);
  EXPECT_EQ(tensor(got, "blk.0.ffn_up.weight").type, ggl::Type::Q8_0);
  EXPECT_EQ(tensor(got, "blk.0.attn_norm.weight").type, ggl::Type::F32);

  const fs::path out2 = in.parent_path() / "pure.gguf";
  r = run_latte("quantize --pure " + q(in) + " " + q(out2) + " q8_0");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("--pure forbids"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out2));
}

TEST(QuantizeCli, ErrorsAreOneLineAndLeaveNoFile) {
  LATTE_REQUIRE_SHARED(kF32);
  const fs::path dir = fresh_dir("qerr");
  struct Case {
    std::string args, expected;
  };
  const fs::path bad = dir / "bad.gguf";
  std::ofstream(bad) << "GGUF but not really";
  for (const Case& c :
       {Case{q(shared_dir() / kF32) + " " + q(dir / "o.gguf") + " q5_k", "TYPE 'q5_k' is not one of"},
        Case{q(shared_dir() / kF32) + " " + q(dir / "o.gguf") + " tq1_0", "TYPE 'tq1_0' is not one of"},
        Case{q(shared_dir() / kF32) + " " + q(dir / "o.gguf") + " iq2_xxs",
             "type iq2_xxs needs an importance matrix (--imatrix"},
        Case{q(shared_dir() / kF32) + " " + q(dir / "o.gguf") + " q4_k_m --include-weights attn",
             "--include-weights / --exclude-weights select importance matrix entries: they need --imatrix"},
        Case{q(shared_dir() / kF32) + " " + q(dir / "o.gguf") + " q4_k_m --tensor-type-file " + q(dir / "none.txt"),
             "none.txt"},
        Case{q(shared_dir() / kF32) + " " + q(dir / "o.gguf") + " q4_k_m --tensor-type attn=q9_k",
             "--tensor-type attn=q9_k: type 'q9_k' is not one of"},
        Case{q(shared_dir() / kF32) + " " + q(dir / "o.gguf") + " q4_k_m --tensor-type attn",
             "--tensor-type 'attn' is not REGEX=TYPE"},
        Case{q(shared_dir() / kF32) + " " + q(dir / "o.gguf") + " q4_k_m --output-tensor-type q4_k",
             "--output-tensor-type q4_K: tensor output.weight has rows of 320, not a multiple of 256"},
        Case{q(dir / "missing.gguf") + " " + q(dir / "o.gguf") + " q8_0", "missing.gguf"},
        Case{q(bad) + " " + q(dir / "o.gguf") + " q8_0", "bad.gguf"},
        Case{q(shared_dir() / kF32) + " " + q(dir / "o.gguf") + " q8_0 --token-embedding-type i32",
             "--token-embedding-type 'i32' is not one of"}}) {
    auto r = run_latte("quantize " + c.args);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_EQ(r.out.rfind("latte quantize: error: ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find(c.expected), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(dir / "o.gguf"));
  }
}

// --dry-run: the plan of every tensor and the total, the same choices and refusals as a real run,
// and no output file; --include-weights / --exclude-weights choose the tensors the importance
// matrix reaches; --tensor-type-file's specs take that flag's place among the --tensor-type flags.
class QuantizeDryRun : public ::testing::Test {
 protected:
  void SetUp() override {
    LATTE_REQUIRE_SHARED(kTiny);
    LATTE_REQUIRE_SHARED(kImatrix);
    dir_ = fresh_dir("dryrun");
  }
  // The plan's line for tensor `name` (its text after the name), or "" when there is none.
  static std::string line_of(const std::string& out, const std::string& name) {
    const size_t at = out.find(" " + name + " ");
    if (at == std::string::npos) return "";
    const size_t end = out.find('\n', at);
    return out.substr(at + name.size() + 2, end - at - name.size() - 2);
  }
  latte::testing::CommandResult dry_run(const std::string& type, const std::string& flags) {
    return run_latte("quantize " + q(shared_dir() / kTiny) + " " + q(dir_ / "o.gguf") + " " + type + " --dry-run " +
                     flags);
  }
  std::string imatrix() const { return "--imatrix " + q(shared_dir() / kImatrix); }

  static constexpr const char* kTiny = "fixtures/kquant/kq-tiny-f32.gguf";
  static constexpr const char* kImatrix = "fixtures/iquant/kq-tiny.imatrix.dat";
  fs::path dir_;
};

TEST_F(QuantizeDryRun, PrintsThePlanAndTheTotalAndWritesNothing) {
  const auto r = dry_run("iq3_xxs", imatrix());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(fs::exists(dir_ / "o.gguf"));
  // The reference file's types, with the importance matrix where it has an entry.
  const ggl::GgufFile ref((shared_dir() / "fixtures/iquant/kq-tiny-iq3_xxs.gguf").string());
  const ggl::GgufFile in((shared_dir() / kTiny).string());
  uint64_t total = 0, total_in = 0;
  for (const ggl::TensorInfo& t : in.tensors()) total_in += t.nbytes;
  for (const ggl::TensorInfo& t : ref.tensors()) {
    const std::string line = line_of(r.out, t.name);
    EXPECT_NE(line.find("f32 -> " + std::string(ggl::type_name(t.type))), std::string::npos) << t.name << ": " << line;
    total += t.nbytes;
  }
  EXPECT_NE(line_of(r.out, "blk.1.ffn_up_exps.weight").find("[256, 256, 4] f32 -> iq3_xxs (imatrix), 1.00 MiB ->"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(line_of(r.out, "token_embd.weight").find("(imatrix)"), std::string::npos) << r.out;  // no entry
  EXPECT_NE(r.out.find(fmt::format("{} tensors, {:.2f} MiB -> {:.2f} MiB of tensor data; nothing written",
                                   ref.tensors().size(), static_cast<double>(total_in) / (1 << 20),
                                   static_cast<double>(total) / (1 << 20))),
            std::string::npos)
      << r.out;
  // A plan the real run would refuse is refused here too.
  const auto pure = dry_run("iq3_xxs", imatrix() + " --pure");
  EXPECT_EQ(pure.exit_code, 1) << pure.out;
  EXPECT_NE(pure.out.find("--pure forbids"), std::string::npos) << pure.out;
}

TEST_F(QuantizeDryRun, IncludeAndExcludeWeightsChooseWhereTheImportanceMatrixApplies) {
  auto r = dry_run("iq3_s", imatrix() + " --exclude-weights ffn_ --exclude-weights attn_q_a");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(line_of(r.out, "blk.1.ffn_down_exps.weight").find("(imatrix)"), std::string::npos) << r.out;
  EXPECT_EQ(line_of(r.out, "blk.0.attn_q_a.weight").find("(imatrix)"), std::string::npos) << r.out;
  EXPECT_NE(line_of(r.out, "blk.0.attn_kv_b.weight").find("(imatrix)"), std::string::npos) << r.out;

  r = dry_run("iq3_s", imatrix() + " --include-weights attn_kv_b");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(line_of(r.out, "blk.1.attn_kv_b.weight").find("(imatrix)"), std::string::npos) << r.out;
  EXPECT_EQ(line_of(r.out, "blk.1.attn_output.weight").find("(imatrix)"), std::string::npos) << r.out;

  // A selection that leaves nothing is no importance matrix: iq3_xxs's ffn_down then takes Q3_K.
  r = dry_run("iq3_xxs", imatrix() + " --include-weights no_such_tensor");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(line_of(r.out, "blk.1.ffn_down_exps.weight").find("f32 -> q3_K,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("leave no entry"), std::string::npos) << r.out;

  r = dry_run("iq3_s", imatrix() + " --include-weights attn --exclude-weights ffn");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("cannot be used together"), std::string::npos) << r.out;
}

TEST_F(QuantizeDryRun, TensorTypeFileTakesItsPlaceAmongTheTensorTypeFlags) {
  std::ofstream(dir_ / "types.txt") << "attn_kv_b=q6_k ffn_down=q8_0\nblk\\.1\\.ffn_up=q5_0\n";
  const std::string file = " --tensor-type-file " + q(dir_ / "types.txt");
  auto r = dry_run("q4_k_m", file);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(line_of(r.out, "blk.0.attn_kv_b.weight").find("-> q6_K,"), std::string::npos) << r.out;
  EXPECT_NE(line_of(r.out, "blk.1.ffn_down_exps.weight").find("-> q8_0,"), std::string::npos) << r.out;
  EXPECT_NE(line_of(r.out, "blk.1.ffn_up_shexp.weight").find("-> q5_0,"), std::string::npos) << r.out;
  EXPECT_NE(line_of(r.out, "blk.0.ffn_up.weight").find("-> q4_K,"), std::string::npos) << r.out;
  // The first match wins, in command-line order.
  r = dry_run("q4_k_m", "--tensor-type attn=q5_1" + file);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(line_of(r.out, "blk.0.attn_kv_b.weight").find("-> q5_1,"), std::string::npos) << r.out;
  r = dry_run("q4_k_m", file + " --tensor-type attn=q5_1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(line_of(r.out, "blk.0.attn_kv_b.weight").find("-> q6_K,"), std::string::npos) << r.out;
  EXPECT_NE(line_of(r.out, "blk.0.attn_output.weight").find("-> q5_1,"), std::string::npos) << r.out;
}

// A K-quant file cut short: the GGUF reader refuses it before anything is written.
TEST(QuantizeCli, TruncatedKquantFileIsRefused) {
  const std::string ref = "fixtures/kquant/kq-tiny-q4_k_m.gguf";
  LATTE_REQUIRE_SHARED(ref);
  const fs::path dir = fresh_dir("qtrunc");
  std::ifstream in(shared_dir() / ref, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(dir / "cut.gguf", std::ios::binary) << bytes.substr(0, bytes.size() - 1000);
  for (const std::string& cmd :
       {"quantize " + q(dir / "cut.gguf") + " " + q(dir / "o.gguf") + " q8_0 --allow-requantize",
        "info " + q(dir / "cut.gguf")}) {
    auto r = run_latte(cmd);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_NE(r.out.find("cut.gguf"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(dir / "o.gguf"));
  }
}

// `latte convert --type T` and `latte quantize` of the F32 conversion use the same recipe and
// quantizers: a legacy type and a K-quant mix (whose fallbacks and more-bits tensors must agree too).
TEST(QuantizeCli, ConvertAndQuantizeAgree) {
  LATTE_REQUIRE_SHARED("models/tiny-mla-stories-hf");
  const fs::path dir = fresh_dir("agree");
  const fs::path hf = shared_dir() / "models/tiny-mla-stories-hf";
  auto r = run_latte("convert " + q(hf) + " -o " + q(dir / "f32.gguf") + " --type f32");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const std::string type : {"q4_1", "q4_k_m", "q3_k_m"}) {
    r = run_latte("convert " + q(hf) + " -o " + q(dir / (type + ".gguf")) + " --type " + type);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    ggl::GgufFile direct((dir / (type + ".gguf")).string());
    ggl::GgufFile via(quantize(dir / "f32.gguf", type, "", "via-f32-" + type + ".gguf").string());
    ASSERT_EQ(direct.tensors().size(), via.tensors().size());
    for (const ggl::TensorInfo& t : direct.tensors()) EXPECT_TRUE(same_bytes(tensor(via, t.name), t)) << t.name;
    EXPECT_EQ(direct.metadata().get<uint32_t>("general.file_type"), via.metadata().get<uint32_t>("general.file_type"));
  }
}

}  // namespace test_quantize_cli
