// Importance matrices for `latte quantize --imatrix`: both file formats (written here by tiny
// writers that follow llama.cpp's imatrix tool), the weights that reach the quantizer row by row
// (per expert for 3-D tensors), the quantize.imatrix.* keys, and the refusals.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>

#include "convert/imatrix.h"
#include "convert/quantize_gguf.h"
#include "ggml-like/gguf/gguf.h"
#include "ggml-like/quant/quant.h"
#include "tests/support/convert_support.h"
#include "tests/support/test_support.h"

namespace test_imatrix {

using namespace latte::convert_test;
using latte::convert::ImportanceMatrix;
using latte::testing::run_latte;

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

// One weight of the tiny model: rows of ne0, and its importance (ne0 per matrix).
struct TinyTensor {
  std::string name;
  std::vector<int64_t> ne;
};

const std::vector<TinyTensor> kTensors = {
    {"token_embd.weight", {64, 16}},        {"blk.0.attn_norm.weight", {64}},
    {"blk.0.ffn_up.weight", {64, 8}},       {"blk.0.ffn_down_exps.weight", {64, 4, 3}},
    {"blk.0.ffn_gate_inp.weight", {64, 3}}, {"output.weight", {64, 16}},
};

int64_t count(const std::vector<int64_t>& ne) {
  int64_t n = 1;
  for (int64_t x : ne) n *= x;
  return n;
}

// Row r of tensor k starts with 1000 k + r, so a row the quantizer sees names its tensor and row.
fs::path write_model(const fs::path& dir) {
  static std::deque<std::vector<float>> data;
  data.clear();
  ggl::GgufWriter w;
  w.metadata().set("general.architecture", ggl::Value{std::string("llama")});
  w.metadata().set("llama.block_count", ggl::Value{uint32_t{1}});
  w.metadata().set("general.file_type", ggl::Value{uint32_t{0}});
  for (size_t k = 0; k < kTensors.size(); ++k) {
    const TinyTensor& t = kTensors[k];
    std::vector<float>& v = data.emplace_back(static_cast<size_t>(count(t.ne)));
    for (size_t i = 0; i < v.size(); ++i) {
      const size_t row = i / static_cast<size_t>(t.ne[0]), col = i % static_cast<size_t>(t.ne[0]);
      v[i] = col == 0 ? static_cast<float>(1000 * k + row) : std::sin(static_cast<float>(i + 7 * k));
    }
    w.add_tensor(t.name, ggl::Type::F32, t.ne, v.data());
  }
  const fs::path path = dir / "model.gguf";
  w.write(path.string());
  return path;
}

// The importance each matrix should get: distinct positive values.
std::vector<float> weights_for(const TinyTensor& t) {
  const int64_t n_matrix = t.ne.size() > 2 ? t.ne[2] : 1;
  std::vector<float> v(static_cast<size_t>(t.ne[0] * n_matrix));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f + static_cast<float>((i * 37) % 101) / 16.0f;
  return v;
}

// What the imatrix tool records for the matmul weights (not token_embd, norms or the router).
std::vector<const TinyTensor*> imatrix_tensors() { return {&kTensors[2], &kTensors[3], &kTensors[5]}; }

// GGUF format: <name>.in_sum2 [ne0, n_matrix] sums, <name>.counts [1, n_matrix].
fs::path write_gguf_imatrix(const fs::path& path, std::vector<const TinyTensor*> tensors, int64_t ne0_delta = 0) {
  static std::deque<std::vector<float>> data;
  data.clear();
  ggl::GgufWriter w;
  w.metadata().set("general.type", ggl::Value{std::string("imatrix")});
  ggl::Array datasets{ggl::ValueType::STRING, {ggl::Value{std::string("wiki.train.raw")}}};
  w.metadata().set("imatrix.datasets", ggl::Value{datasets});
  w.metadata().set("imatrix.chunk_count", ggl::Value{uint32_t{42}});
  w.metadata().set("imatrix.chunk_size", ggl::Value{uint32_t{512}});
  for (const TinyTensor* t : tensors) {
    const int64_t n_matrix = t->ne.size() > 2 ? t->ne[2] : 1, ne0 = t->ne[0] + ne0_delta;
    const std::vector<float> want = weights_for(*t);
    std::vector<float>& sums = data.emplace_back(static_cast<size_t>(ne0 * n_matrix));
    std::vector<float>& counts = data.emplace_back(static_cast<size_t>(n_matrix));
    for (int64_t m = 0; m < n_matrix; ++m) {
      counts[m] = static_cast<float>(10 + 3 * m);
      for (int64_t i = 0; i < ne0; ++i) sums[m * ne0 + i] = want[(m * ne0 + i) % want.size()] * counts[m];
    }
    w.add_tensor(t->name + ".in_sum2", ggl::Type::F32, {ne0, n_matrix}, sums.data());
    w.add_tensor(t->name + ".counts", ggl::Type::F32, {1, n_matrix}, counts.data());
  }
  w.write(path.string());
  return path;
}

// Legacy .dat: entries of (name, ncall, values * ncall), then the chunk count and dataset name.
fs::path write_dat_imatrix(const fs::path& path, std::vector<const TinyTensor*> tensors, bool with_tail = true) {
  std::ofstream out(path, std::ios::binary);
  auto i32 = [&](int32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
  i32(static_cast<int32_t>(tensors.size()));
  for (const TinyTensor* t : tensors) {
    i32(static_cast<int32_t>(t->name.size()));
    out.write(t->name.data(), static_cast<std::streamsize>(t->name.size()));
    const int32_t ncall = 7;
    std::vector<float> v = weights_for(*t);
    for (float& x : v) x *= ncall;
    i32(ncall);
    i32(static_cast<int32_t>(v.size()));
    out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  }
  if (with_tail) {
    i32(17);
    const std::string dataset = "calibration.txt";
    i32(static_cast<int32_t>(dataset.size()));
    out.write(dataset.data(), static_cast<std::streamsize>(dataset.size()));
  }
  return path;
}

// Runs quantize_gguf with a quantizer that records, per (tensor, row), the importance it received.
struct Recorded {
  std::map<std::pair<int, int>, std::vector<float>> importance;  // (tensor, row) -> weights ({} for none)
};

Recorded quantize_recording(const fs::path& model, const fs::path& imatrix, const fs::path& out) {
  Recorded rec;
  std::mutex mu;
  latte::convert::QuantizeOptions o;
  o.input_path = model.string();
  o.output_path = out.string();
  o.file_type = *latte::convert::find_file_type("q8_0");
  o.imatrix_path = imatrix.string();
  o.progress = false;
  o.on_notice = [](std::string_view) {};
  o.quantizer = [&](ggl::Type t, const float* src, void* dst, int64_t n, const float* importance) {
    ggl::quantize_row(t, src, dst, n);
    const int id = static_cast<int>(src[0]);
    std::lock_guard<std::mutex> lock(mu);
    rec.importance[{id / 1000, id % 1000}] =
        importance ? std::vector<float>(importance, importance + n) : std::vector<float>{};
  };
  latte::convert::quantize_gguf(o);
  return rec;
}

void expect_weights_reach_the_quantizer(const Recorded& rec) {
  for (size_t k = 0; k < kTensors.size(); ++k) {
    const TinyTensor& t = kTensors[k];
    if (t.ne.size() < 2 || t.name.find("gate_inp") != std::string::npos) continue;  // stays f32
    const bool has = t.name != "token_embd.weight";
    const std::vector<float> want = weights_for(t);
    const int64_t rows = count(t.ne) / t.ne[0];
    for (int64_t r = 0; r < rows; ++r) {
      const auto it = rec.importance.find({static_cast<int>(k), static_cast<int>(r)});
      ASSERT_NE(it, rec.importance.end()) << t.name << " row " << r;
      if (!has) {
        EXPECT_TRUE(it->second.empty()) << t.name;
        continue;
      }
      const int64_t matrix = r / t.ne[1];  // the expert of a 3-D tensor
      const std::vector<float> expect(want.begin() + matrix * t.ne[0], want.begin() + (matrix + 1) * t.ne[0]);
      ASSERT_EQ(it->second.size(), expect.size()) << t.name;
      for (size_t i = 0; i < expect.size(); ++i)
        ASSERT_NEAR(it->second[i], expect[i], 1e-6f * expect[i]) << t.name << " row " << r << " col " << i;
    }
  }
}

TEST(Imatrix, GgufWeightsReachTheQuantizerPerExpert) {
  const fs::path dir = fresh_dir("imatrix-gguf");
  const fs::path model = write_model(dir);
  const fs::path im = write_gguf_imatrix(dir / "imatrix.gguf", imatrix_tensors());
  expect_weights_reach_the_quantizer(quantize_recording(model, im, dir / "out.gguf"));
  const ggl::GgufFile got((dir / "out.gguf").string());
  EXPECT_EQ(got.metadata().get<std::string>("quantize.imatrix.file"), im.string());
  EXPECT_EQ(got.metadata().get<std::string>("quantize.imatrix.dataset"), "wiki.train.raw");
  EXPECT_EQ(got.metadata().get<uint32_t>("quantize.imatrix.entries_count"), 3u);
  EXPECT_EQ(got.metadata().get<uint32_t>("quantize.imatrix.chunks_count"), 42u);
}

TEST(Imatrix, LegacyDatWeightsReachTheQuantizer) {
  const fs::path dir = fresh_dir("imatrix-dat");
  const fs::path model = write_model(dir);
  const fs::path im = write_dat_imatrix(dir / "imatrix.dat", imatrix_tensors());
  expect_weights_reach_the_quantizer(quantize_recording(model, im, dir / "out.gguf"));
  const ggl::GgufFile got((dir / "out.gguf").string());
  EXPECT_EQ(got.metadata().get<std::string>("quantize.imatrix.dataset"), "calibration.txt");
  EXPECT_EQ(got.metadata().get<uint32_t>("quantize.imatrix.entries_count"), 3u);
  EXPECT_EQ(got.metadata().get<uint32_t>("quantize.imatrix.chunks_count"), 17u);

  // Older .dat files end after the entries: no dataset, no chunk count.
  const fs::path old = write_dat_imatrix(dir / "old.dat", imatrix_tensors(), false);
  const ImportanceMatrix m = ImportanceMatrix::load(old.string());
  EXPECT_EQ(m.dataset(), "");
  EXPECT_EQ(m.chunks(), 0);
  EXPECT_EQ(m.entries().size(), 3u);
  ggl::Metadata md;
  m.add_metadata(md);
  EXPECT_FALSE(md.has("quantize.imatrix.dataset"));
  EXPECT_FALSE(md.has("quantize.imatrix.chunks_count"));
}

TEST(Imatrix, ZeroCountsGiveUnitWeights) {
  const fs::path dir = fresh_dir("imatrix-zero");
  ggl::GgufWriter w;
  std::vector<float> sums(8 * 2, 3.0f), counts = {0.0f, 2.0f};
  w.add_tensor("blk.0.ffn_down_exps.weight.in_sum2", ggl::Type::F32, {8, 2}, sums.data());
  w.add_tensor("blk.0.ffn_down_exps.weight.counts", ggl::Type::F32, {1, 2}, counts.data());
  w.write((dir / "z.gguf").string());
  const ImportanceMatrix m = ImportanceMatrix::load((dir / "z.gguf").string());
  const std::vector<float>& v = *m.find("blk.0.ffn_down_exps.weight");
  for (int i = 0; i < 8; ++i) EXPECT_EQ(v[i], 1.0f);  // an expert the data never reached
  for (int i = 8; i < 16; ++i) EXPECT_EQ(v[i], 1.5f);
}

fs::path quantize_cli(const fs::path& model, const std::string& type, const std::string& flags, const fs::path& out) {
  const auto r = run_latte("quantize --no-progress " + flags + " " + q(model) + " " + q(out) + " " + type);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return out;
}

bool same_bytes(const ggl::TensorInfo& a, const ggl::TensorInfo& b) {
  return a.type == b.type && a.nbytes == b.nbytes && std::memcmp(a.data, b.data, a.nbytes) == 0;
}

// With an imatrix, exactly the tensors that have an entry and a type whose quantizer weighs its
// error change bytes; the rest are as without one.
void expect_imatrix_changes(const fs::path& model, const fs::path& imatrix, const std::string& type,
                            const fs::path& dir) {
  const ggl::GgufFile plain(quantize_cli(model, type, "", dir / ("plain-" + type + ".gguf")).string());
  const ggl::GgufFile weighted(
      quantize_cli(model, type, "--imatrix " + q(imatrix), dir / ("weighted-" + type + ".gguf")).string());
  const ImportanceMatrix im = ImportanceMatrix::load(imatrix.string());
  size_t changed = 0;
  for (const ggl::TensorInfo& a : plain.tensors()) {
    const ggl::TensorInfo* b = weighted.find_tensor(a.name);
    ASSERT_NE(b, nullptr) << a.name;
    ASSERT_EQ(a.type, b->type) << a.name;
    const bool uses = im.find(a.name) && ggl::quantizer_uses_importance(a.type);
    EXPECT_EQ(same_bytes(a, *b), !uses) << type << " " << a.name << " (" << ggl::type_name(a.type) << ")";
    changed += uses;
  }
  EXPECT_GT(changed, 0u) << type;
}

TEST(Imatrix, ChangesTheBytesOfTypesThatUseIt) {
  const fs::path dir = fresh_dir("imatrix-bytes");
  const fs::path model = write_model(dir);
  const fs::path im = write_gguf_imatrix(dir / "imatrix.gguf", imatrix_tensors());
  for (const char* type : {"q4_0", "q5_1", "iq4_nl"}) expect_imatrix_changes(model, im, type, dir);
  // Q8_0 has no weighted search: the imatrix changes nothing but the keys.
  const ggl::GgufFile a(quantize_cli(model, "q8_0", "", dir / "a.gguf").string());
  const ggl::GgufFile b(quantize_cli(model, "q8_0", "--imatrix " + q(im), dir / "b.gguf").string());
  for (const ggl::TensorInfo& t : a.tensors()) EXPECT_TRUE(same_bytes(t, *b.find_tensor(t.name))) << t.name;
}

// The K-quant mixes on the kquant fixture model, with an imatrix for its matmul weights.
TEST(Imatrix, ChangesKquantBytes) {
  const std::string f32 = "fixtures/kquant/kq-tiny-f32.gguf";
  LATTE_REQUIRE_SHARED(f32);
  const fs::path dir = fresh_dir("imatrix-kquant");
  const ggl::GgufFile in((latte::testing::shared_dir() / f32).string());
  std::vector<TinyTensor> weights;
  for (const ggl::TensorInfo& t : in.tensors())
    if (t.n_dims >= 2 && t.name.rfind("blk.", 0) == 0 && t.name.find("gate_inp") == std::string::npos)
      weights.push_back({t.name, std::vector<int64_t>(t.ne, t.ne + t.n_dims)});
  std::vector<const TinyTensor*> ptrs;
  for (const TinyTensor& t : weights) ptrs.push_back(&t);
  const fs::path im = write_dat_imatrix(dir / "kq.dat", ptrs);
  for (const char* type : {"q4_k_m", "q2_k", "q6_k", "iq4_xs"})
    expect_imatrix_changes(latte::testing::shared_dir() / f32, im, type, dir);
}

// An importance matrix that lacks a tensor which an IQ1/IQ2 type needs one for: llama.cpp refuses
// to quantize it, and so does latte, naming the tensor, before anything is written.
TEST(Imatrix, MissingEntryForAVeryLowBitTensorIsAOneLineError) {
  const std::string f32 = "fixtures/kquant/kq-tiny-f32.gguf";
  LATTE_REQUIRE_SHARED(f32);
  const fs::path dir = fresh_dir("imatrix-missing-entry");
  const TinyTensor q_a{"blk.0.attn_q_a.weight", {256, 128}};
  const fs::path im = write_dat_imatrix(dir / "partial.dat", {&q_a});
  const fs::path model = latte::testing::shared_dir() / f32, out = dir / "out.gguf";
  for (const char* type : {"iq2_xxs", "iq1_s"}) {
    const auto r = run_latte("quantize --imatrix " + q(im) + " " + q(model) + " " + q(out) + " " + type);
    EXPECT_EQ(r.exit_code, 1) << type << ": " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_NE(
        r.out.find("no importance matrix entry for tensor blk.0.attn_kv_a_mqa.weight, which is " + std::string(type)),
        std::string::npos)
        << r.out;
    EXPECT_FALSE(fs::exists(out)) << type;
  }
  // With the entry there, the same tensor quantizes.
  const TinyTensor kv_a{"blk.0.attn_kv_a_mqa.weight", {256, 576}};
  const fs::path both = write_dat_imatrix(dir / "both.dat", {&q_a, &kv_a});
  const auto r = run_latte("quantize --dry-run --imatrix " + q(both) + " " + q(model) + " " + q(out) + " iq2_xxs");
  EXPECT_EQ(r.out.find("blk.0.attn_kv_a_mqa.weight, which is"), std::string::npos) << r.out;
}

// Corrupt files, an imatrix for another model, a size mismatch: one line, exit 1, no output.
TEST(Imatrix, BadImatrixIsAOneLineErrorAndLeavesNoFile) {
  const fs::path dir = fresh_dir("imatrix-bad");
  const fs::path model = write_model(dir);
  const fs::path good = write_dat_imatrix(dir / "good.dat", imatrix_tensors());
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto put = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir / name, std::ios::binary) << content;
    return dir / name;
  };
  TinyTensor other{"blk.7.attn_q.weight", {64, 8}};
  TinyTensor wide{"blk.0.ffn_up.weight", {128, 8}};
  struct Case {
    fs::path file;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {put("truncated.dat", bytes.substr(0, bytes.size() / 2)), "truncated importance matrix"},
      {put("garbage.dat", std::string("\xff\xff\xff\xff garbage", 12)), "not an importance matrix"},
      {put("empty.dat", ""), "truncated importance matrix"},
      {put("trailing.dat", bytes + "xyz"), "corrupt importance matrix"},
      {put("bad.gguf", "GGUF and then nothing"), "bad.gguf"},
      {model, "not an importance matrix (no <tensor>.in_sum2"},  // a model is not an imatrix
      {write_dat_imatrix(dir / "other.dat", {&kTensors[2], &other}), "'blk.7.attn_q.weight' is not a tensor of"},
      {write_dat_imatrix(dir / "wide.dat", {&wide}), "has 128 weights, but the tensor needs 64"},
      {write_gguf_imatrix(dir / "wide.gguf", {&kTensors[3]}, 64), "has 384 weights, but the tensor needs 192"},
      {dir / "missing.dat", "missing.dat: cannot open"},
  };
  for (const Case& c : cases) {
    const fs::path out = dir / "out.gguf";
    const auto r = run_latte("quantize --imatrix " + q(c.file) + " " + q(model) + " " + q(out) + " q8_0");
    EXPECT_EQ(r.exit_code, 1) << c.file << ": " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_EQ(r.out.rfind("latte quantize: error: ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find(c.expected), std::string::npos) << c.file << ": " << r.out;
    EXPECT_FALSE(fs::exists(out)) << c.file;
  }
  // Non-finite weights are refused too.
  TinyTensor nan_t = kTensors[2];
  std::ofstream nan_file(dir / "nan.dat", std::ios::binary);
  const int32_t header[] = {1, static_cast<int32_t>(nan_t.name.size())};
  nan_file.write(reinterpret_cast<const char*>(header), 8);
  nan_file.write(nan_t.name.data(), static_cast<std::streamsize>(nan_t.name.size()));
  const int32_t counts[] = {1, 64};
  nan_file.write(reinterpret_cast<const char*>(counts), 8);
  std::vector<float> v(64, std::nanf(""));
  nan_file.write(reinterpret_cast<const char*>(v.data()), 256);
  nan_file.close();
  EXPECT_THROW(ImportanceMatrix::load((dir / "nan.dat").string()), ggl::Error);
}

}  // namespace test_imatrix
