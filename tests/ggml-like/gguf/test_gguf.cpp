// GGUF writer + reader: round trips of every value type, key order, tensor layout and alignment,
// v2 files, typed accessor errors, writer validation and the writer's atomicity.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "ggml-like/gguf/gguf.h"
#include "tests/support/gguf_test_util.h"
#include "tests/support/test_support.h"

namespace test_gguf {

namespace fs = std::filesystem;
using ggl::Array;
using ggl::GgufFile;
using ggl::GgufWriter;
using ggl::Type;
using ggl::Value;
using ggl::ValueType;

using latte::testing::same_value;

Value array_of(ValueType t, std::vector<Value> items) { return Value{Array{t, std::move(items)}}; }

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A scratch directory per test, removed afterwards.
class GgufTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("latte-gguf-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::vector<std::string> files_in_dir() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  fs::path dir_;
};

// Every scalar type at interesting values, arrays of each, arrays of strings, nested arrays.
std::vector<std::pair<std::string, Value>> every_value_type() {
  std::vector<std::pair<std::string, Value>> kv = {
      {"t.u8", Value{uint8_t{255}}},
      {"t.i8", Value{int8_t{-128}}},
      {"t.u16", Value{uint16_t{65535}}},
      {"t.i16", Value{int16_t{-32768}}},
      {"t.u32", Value{uint32_t{4000000000u}}},
      {"t.i32", Value{int32_t{-2000000000}}},
      {"t.f32", Value{-1.5e-7f}},
      {"t.f32_nan", Value{std::numeric_limits<float>::quiet_NaN()}},
      {"t.bool_true", Value{true}},
      {"t.bool_false", Value{false}},
      {"t.string", Value{std::string("héllo\nworld")}},
      {"t.string_empty", Value{std::string()}},
      {"t.u64", Value{uint64_t{18446744073709551615ull}}},
      {"t.i64", Value{int64_t{std::numeric_limits<int64_t>::min()}}},
      {"t.f64", Value{-0.0}},
      {"t.arr_u8", array_of(ValueType::U8, {Value{uint8_t{1}}, Value{uint8_t{2}}})},
      {"t.arr_i8", array_of(ValueType::I8, {Value{int8_t{-1}}})},
      {"t.arr_u16", array_of(ValueType::U16, {Value{uint16_t{7}}})},
      {"t.arr_i16", array_of(ValueType::I16, {Value{int16_t{-7}}})},
      {"t.arr_u32", array_of(ValueType::U32, {Value{uint32_t{1}}, Value{uint32_t{2}}, Value{uint32_t{3}}})},
      {"t.arr_i32", array_of(ValueType::I32, {Value{int32_t{-3}}, Value{int32_t{3}}})},
      {"t.arr_f32", array_of(ValueType::F32, {Value{0.25f}, Value{-2.0f}})},
      {"t.arr_bool", array_of(ValueType::BOOL, {Value{true}, Value{false}, Value{true}})},
      {"t.arr_u64", array_of(ValueType::U64, {Value{uint64_t{1} << 40}})},
      {"t.arr_i64", array_of(ValueType::I64, {Value{int64_t{-1} << 40}})},
      {"t.arr_f64", array_of(ValueType::F64, {Value{3.25}})},
      {"t.arr_empty", array_of(ValueType::F32, {})},
      {"t.arr_strings",
       array_of(ValueType::STRING, {Value{std::string("<s>")}, Value{std::string("")}, Value{std::string("a b")}})},
      {"t.nested",
       array_of(ValueType::ARRAY, {array_of(ValueType::U32, {Value{uint32_t{1}}, Value{uint32_t{2}}}),
                                   array_of(ValueType::STRING, {Value{std::string("x")}}),
                                   array_of(ValueType::ARRAY, {array_of(ValueType::I8, {Value{int8_t{5}}})}),
                                   array_of(ValueType::F64, {})})},
  };
  return kv;
}

TEST_F(GgufTest, RoundTripsEveryValueTypeInOrder) {
  GgufWriter w;
  auto kv = every_value_type();
  for (auto& [k, v] : kv) w.metadata().set(k, v);
  w.write(path("m.gguf"));

  GgufFile f(path("m.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_TRUE(f.tensors().empty());
  const auto& entries = f.metadata().entries();
  ASSERT_EQ(entries.size(), kv.size());  // no general.alignment at the default alignment
  for (size_t i = 0; i < kv.size(); ++i) {
    EXPECT_EQ(entries[i].first, kv[i].first);
    EXPECT_TRUE(same_value(entries[i].second, kv[i].second)) << kv[i].first;
  }
  // Every ValueType occurs, so this is a complete round trip.
  std::vector<bool> seen(13);
  for (const auto& [k, v] : kv) seen[static_cast<size_t>(v.type())] = true;
  EXPECT_EQ(std::count(seen.begin(), seen.end(), true), 13);
}

TEST_F(GgufTest, KeyOrderIsInsertionOrderAndReplacementKeepsPosition) {
  GgufWriter w;
  for (const char* k : {"zeta", "alpha", "mid.key", "beta"}) w.metadata().set(k, Value{std::string(k)});
  w.metadata().set("alpha", Value{uint32_t{7}});
  w.metadata().erase("mid.key");
  w.metadata().set("gamma", Value{true});
  w.write(path("o.gguf"));
  GgufFile f(path("o.gguf"));
  std::vector<std::string> keys;
  for (const auto& [k, v] : f.metadata().entries()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"zeta", "alpha", "beta", "gamma"}));
  EXPECT_EQ(f.metadata().get<uint32_t>("alpha"), 7u);
}

struct Tensor {
  std::string name;
  Type type;
  std::vector<int64_t> ne;
  std::vector<uint8_t> bytes;
};

std::vector<Tensor> sample_tensors() {
  std::vector<Tensor> ts = {
      {"tok_embd.weight", Type::F32, {3}, {}},  // 12 bytes: forces padding
      {"blk.0.attn.weight", Type::Q8_0, {64, 3}, {}},
      {"blk.0.ffn.weight", Type::Q4_0, {32, 1, 2}, {}},
      {"blk.0.norm", Type::F16, {5, 1, 1, 3}, {}},
      {"pos", Type::I32, {7}, {}},
      {"bf", Type::BF16, {9}, {}},
  };
  uint8_t x = 1;
  for (Tensor& t : ts) {
    int64_t n = 1;
    for (int64_t d : t.ne) n *= d;
    t.bytes.resize(ggl::row_bytes(t.type, t.ne[0]) * static_cast<size_t>(n / t.ne[0]));
    for (uint8_t& b : t.bytes) b = x = static_cast<uint8_t>(x * 31 + 7);
  }
  return ts;
}

void expect_tensors(const GgufFile& f, const std::vector<Tensor>& ts) {
  ASSERT_EQ(f.tensors().size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const ggl::TensorInfo& got = f.tensors()[i];
    SCOPED_TRACE(ts[i].name);
    EXPECT_EQ(got.name, ts[i].name);
    EXPECT_EQ(got.type, ts[i].type);
    ASSERT_EQ(got.n_dims, static_cast<int>(ts[i].ne.size()));
    for (int d = 0; d < ggl::kMaxDims; ++d) EXPECT_EQ(got.ne[d], d < got.n_dims ? ts[i].ne[d] : 1);
    ASSERT_EQ(got.nbytes, ts[i].bytes.size());
    EXPECT_EQ(std::memcmp(got.data, ts[i].bytes.data(), got.nbytes), 0);
    EXPECT_EQ(f.find_tensor(ts[i].name), &got);
  }
  EXPECT_EQ(f.find_tensor("absent"), nullptr);
}

// Checks the layout against the bytes on disk: data aligned, padding zero, tensors in order, tight.
void expect_layout(const std::string& file, uint64_t alignment) {
  GgufFile f(file);
  std::vector<uint8_t> bytes = read_bytes(file);
  ASSERT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.data_offset() % alignment, 0u);
  uint64_t expect_offset = 0;
  for (const ggl::TensorInfo& t : f.tensors()) {
    EXPECT_EQ(t.offset, expect_offset) << t.name;
    EXPECT_EQ(static_cast<uint64_t>(t.data - f.tensors()[0].data), t.offset);  // the first is at offset 0
    uint64_t end = f.data_offset() + t.offset + t.nbytes;
    expect_offset = (t.offset + t.nbytes + alignment - 1) / alignment * alignment;
    for (uint64_t i = end; i < f.data_offset() + expect_offset; ++i) ASSERT_EQ(bytes[i], 0) << "padding of " << t.name;
  }
  EXPECT_EQ(bytes.size(), f.data_offset() + expect_offset);
}

TEST_F(GgufTest, TensorDataRoundTripsAlignedAtDefaultAlignment) {
  auto ts = sample_tensors();
  GgufWriter w;
  w.metadata().set("general.architecture", Value{std::string("test")});
  for (const Tensor& t : ts) w.add_tensor(t.name, t.type, t.ne, t.bytes.data());
  w.write(path("t.gguf"));
  GgufFile f(path("t.gguf"));
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_FALSE(f.metadata().has("general.alignment"));
  expect_tensors(f, ts);
  expect_layout(path("t.gguf"), 32);
}

TEST_F(GgufTest, NonDefaultAlignmentIsWrittenAndHonoured) {
  for (uint32_t alignment : {1u, 8u, 64u, 4096u}) {
    SCOPED_TRACE(alignment);
    auto ts = sample_tensors();
    GgufWriter w(alignment);
    w.metadata().set("general.architecture", Value{std::string("test")});
    w.metadata().set("x", Value{uint8_t{1}});
    for (const Tensor& t : ts) w.add_tensor(t.name, t.type, t.ne, t.bytes.data());
    w.write(path("a.gguf"));
    GgufFile f(path("a.gguf"));
    EXPECT_EQ(f.alignment(), alignment);
    EXPECT_EQ(f.metadata().get<uint32_t>("general.alignment"), alignment);
    EXPECT_EQ(f.metadata().entries().back().first, "general.alignment");  // appended after the user's keys
    expect_tensors(f, ts);
    expect_layout(path("a.gguf"), alignment);
  }
}

TEST_F(GgufTest, AlignmentAlreadyInMetadataKeepsItsPositionAndMustAgree) {
  GgufWriter w(64);
  w.metadata().set("general.alignment", Value{uint32_t{64}});
  w.metadata().set("after", Value{uint32_t{1}});
  float data[8] = {};
  w.add_tensor("t", Type::F32, {8}, data);
  w.write(path("a.gguf"));
  GgufFile f(path("a.gguf"));
  ASSERT_EQ(f.metadata().entries().size(), 2u);
  EXPECT_EQ(f.metadata().entries()[0].first, "general.alignment");
  EXPECT_EQ(f.alignment(), 64u);

  GgufWriter bad(32);
  bad.metadata().set("general.alignment", Value{uint32_t{64}});
  EXPECT_THROW(
      try { bad.write(path("b.gguf")); } catch (const ggl::Error& e) {
        EXPECT_NE(std::string(e.what()).find("general.alignment 64 differs from the writer's alignment 32"),
                  std::string::npos)
            << e.what();
        throw;
      },
      ggl::Error);
  GgufWriter wrong_type(32);
  wrong_type.metadata().set("general.alignment", Value{uint64_t{32}});
  EXPECT_THROW(wrong_type.write(path("c.gguf")), ggl::Error);
  EXPECT_FALSE(fs::exists(path("b.gguf")));
  EXPECT_FALSE(fs::exists(path("c.gguf")));
}

TEST_F(GgufTest, SourcesAreStreamedInOrderOncePerWrite) {
  GgufWriter w;
  std::vector<std::pair<std::string, size_t>> calls;
  for (int i = 0; i < 4; ++i) {
    std::string name = fmt::format("t{}", i);
    w.add_tensor(name, Type::F32, {i + 1, 2}, [&calls, name, i](uint8_t* dst, size_t n) {
      calls.emplace_back(name, n);
      for (size_t k = 0; k < n; ++k) dst[k] = static_cast<uint8_t>(i * 50 + k);
    });
  }
  w.write(path("s.gguf"));
  ASSERT_EQ(calls.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(calls[i].first, fmt::format("t{}", i));
    EXPECT_EQ(calls[i].second, static_cast<size_t>((i + 1) * 2 * 4));
  }
  GgufFile f(path("s.gguf"));
  for (int i = 0; i < 4; ++i)
    for (size_t k = 0; k < f.tensors()[i].nbytes; ++k)
      ASSERT_EQ(f.tensors()[i].data[k], static_cast<uint8_t>(i * 50 + k));
}

// The core atomicity promise: a failure midway leaves the old file exactly as it was, no temp file.
TEST_F(GgufTest, FailingSourceLeavesTargetUntouchedAndNoTempFile) {
  const std::string target = path("model.gguf");
  {
    std::ofstream old(target, std::ios::binary);
    old << "previous contents, not even GGUF";
  }
  const std::vector<uint8_t> before = read_bytes(target);
  std::vector<float> data(1 << 16, 1.0f);
  for (bool ggl_error : {false, true}) {
    GgufWriter w;
    w.metadata().set("general.architecture", Value{std::string("test")});
    int called = 0;
    w.add_tensor("a", Type::F32, {1 << 16}, data.data());
    w.add_tensor("b", Type::F32, {4}, [&](uint8_t*, size_t) {
      ++called;
      if (ggl_error) ggl::fail("source for b failed");
      throw std::runtime_error("disk on fire");
    });
    w.add_tensor("c", Type::F32, {4}, [&](uint8_t*, size_t) { ADD_FAILURE() << "called after a failure"; });
    if (ggl_error)
      EXPECT_THROW(w.write(target), ggl::Error);
    else
      EXPECT_THROW(w.write(target), std::runtime_error);
    EXPECT_EQ(called, 1);
    EXPECT_EQ(read_bytes(target), before);
    EXPECT_EQ(files_in_dir(), std::vector<std::string>{"model.gguf"});
  }
}

TEST_F(GgufTest, SuccessfulWriteReplacesTargetAndLeavesNoTempFile) {
  const std::string target = path("model.gguf");
  {
    std::ofstream old(target, std::ios::binary);
    old << "old";
  }
  GgufWriter w;
  w.metadata().set("k", Value{int32_t{-5}});
  w.write(target);
  GgufFile f(target);
  EXPECT_EQ(f.metadata().get<int32_t>("k"), -5);
  EXPECT_EQ(files_in_dir(), std::vector<std::string>{"model.gguf"});
}

TEST_F(GgufTest, UnwritableTargetIsAnErrorNamingIt) {
  GgufWriter w;
  const std::string target = path("no/such/dir/model.gguf");
  try {
    w.write(target);
    FAIL() << "wrote into a missing directory";
  } catch (const ggl::Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(target + ": ", 0), 0u) << e.what();
  }
}

// Expects add_tensor / the constructor / write to throw ggl::Error containing `what`.
template <typename F>
void expect_error(F&& f, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "no error, expected: " << what;
  } catch (const ggl::Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST_F(GgufTest, WriterValidatesTensorsAndMetadata) {
  float data[64] = {};
  GgufWriter w;
  w.add_tensor("ok", Type::F32, {4}, data);
  expect_error([&] { w.add_tensor("ok", Type::F32, {4}, data); }, "duplicate tensor name 'ok'");
  expect_error([&] { w.add_tensor("", Type::F32, {4}, data); }, "empty name");
  expect_error([&] { w.add_tensor(std::string(64, 'n'), Type::F32, {4}, data); }, "longer than 63 bytes");
  expect_error([&] { w.add_tensor("d0", Type::F32, {}, data); }, "has 0 dimensions");
  expect_error([&] { w.add_tensor("d5", Type::F32, {1, 1, 1, 1, 1}, data); }, "has 5 dimensions");
  expect_error([&] { w.add_tensor("z", Type::F32, {4, 0}, data); }, "invalid dimension 1 = 0");
  expect_error([&] { w.add_tensor("neg", Type::F32, {-4}, data); }, "invalid dimension 0 = -4");
  expect_error([&] { w.add_tensor("q", Type::Q8_0, {31}, data); }, "not a multiple of q8_0's block size 32");
  expect_error([&] { w.add_tensor("big", Type::F32, {int64_t{1} << 32, int64_t{1} << 32}, data); }, "overflows");
  expect_error([&] { w.add_tensor("big4", Type::F64, {int64_t{1} << 31, int64_t{1} << 31}, data); }, "overflows");
  expect_error([&] { w.add_tensor("ty", static_cast<Type>(99), {4}, data); }, "unknown ggml type 99");
  expect_error([&] { w.add_tensor("null", Type::F32, {4}, static_cast<const void*>(nullptr)); }, "has no data");
  expect_error([&] { w.add_tensor("nosrc", Type::F32, {4}, GgufWriter::TensorSource{}); }, "no data source");
  expect_error([] { GgufWriter bad(48); }, "alignment 48 is not a power of two");
  expect_error([] { GgufWriter bad(0); }, "alignment 0 is not a power of two");

  expect_error([&] { w.write(""); }, "empty output path");

  GgufWriter mixed;
  mixed.metadata().set("m", array_of(ValueType::U32, {Value{uint32_t{1}}, Value{int32_t{2}}}));
  expect_error([&] { mixed.write(path("m.gguf")); }, "metadata key 'm' item 1 is i32 in an array of u32");
  GgufWriter deep;
  Value v = array_of(ValueType::U8, {});
  for (int i = 0; i < ggl::kMaxArrayDepth; ++i) v = array_of(ValueType::ARRAY, {v});
  deep.metadata().set("deep", v);
  expect_error([&] { deep.write(path("d.gguf")); }, "nests arrays deeper than 8");
  GgufWriter empty_key;
  empty_key.metadata().set("", Value{uint8_t{1}});
  expect_error([&] { empty_key.write(path("e.gguf")); }, "empty metadata key");
  EXPECT_TRUE(files_in_dir().empty());
}

TEST_F(GgufTest, DeepestAllowedNestingRoundTrips) {
  Value v = array_of(ValueType::U8, {Value{uint8_t{9}}});
  for (int i = 1; i < ggl::kMaxArrayDepth; ++i) v = array_of(ValueType::ARRAY, {v});
  GgufWriter w;
  w.metadata().set("deep", v);
  w.write(path("d.gguf"));
  GgufFile f(path("d.gguf"));
  EXPECT_TRUE(same_value(f.metadata().at("deep"), v));
}

// Little-endian byte builder for hand-made files.
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  Bytes& pod(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
  Bytes& str(const std::string& s) {
    pod<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
};

// GGUF v2 is v3's layout (u64 counts and lengths) without v3's endianness promise; we craft one by hand.
TEST_F(GgufTest, ReadsVersion2Files) {
  Bytes f;
  f.pod<uint32_t>(0x46554747).pod<uint32_t>(2).pod<uint64_t>(2).pod<uint64_t>(3);
  f.str("general.architecture").pod<uint32_t>(8).str("llama");
  f.str("llama.block_count").pod<uint32_t>(4).pod<uint32_t>(12);
  f.str("tokenizer.ggml.tokens").pod<uint32_t>(9).pod<uint32_t>(8).pod<uint64_t>(2).str("<unk>").str("hi");
  f.str("w").pod<uint32_t>(2).pod<uint64_t>(2).pod<uint64_t>(2).pod<uint32_t>(0).pod<uint64_t>(0);
  f.str("v").pod<uint32_t>(1).pod<uint64_t>(3).pod<uint32_t>(0).pod<uint64_t>(32);
  while (f.b.size() % 32) f.b.push_back(0);
  const float w[4] = {1, 2, 3, 4}, v[3] = {-1, -2, -3};
  for (float x : w) f.pod(x);
  for (int i = 0; i < 4; ++i) f.pod<float>(0);  // padding
  for (float x : v) f.pod(x);

  {
    std::ofstream out(path("v2.gguf"), std::ios::binary);
    out.write(reinterpret_cast<const char*>(f.b.data()), static_cast<std::streamsize>(f.b.size()));
  }
  GgufFile file(path("v2.gguf"));
  auto mem = GgufFile::from_memory("v2-in-memory", f.b.data(), f.b.size());
  for (const GgufFile* g : {&file, mem.get()}) {
    EXPECT_EQ(g->version(), 2u);
    EXPECT_EQ(g->metadata().get<std::string>("general.architecture"), "llama");
    EXPECT_EQ(g->metadata().get<uint32_t>("llama.block_count"), 12u);
    EXPECT_EQ(g->metadata().get<std::vector<std::string>>("tokenizer.ggml.tokens"),
              (std::vector<std::string>{"<unk>", "hi"}));
    ASSERT_EQ(g->tensors().size(), 2u);
    EXPECT_EQ(g->tensors()[0].n_elements(), 4);
    EXPECT_EQ(std::memcmp(g->find_tensor("w")->data, w, sizeof w), 0);
    EXPECT_EQ(std::memcmp(g->find_tensor("v")->data, v, sizeof v), 0);
  }
  // from_memory does not copy: tensor data points into the caller's buffer.
  EXPECT_EQ(mem->data_offset() % 32, 0u);
  EXPECT_EQ(mem->find_tensor("w")->data, f.b.data() + mem->data_offset());
  EXPECT_EQ(mem->path(), "v2-in-memory");
}

TEST_F(GgufTest, TypedAccessorsConvertWhenSafeAndExplainWhenNot) {
  GgufWriter w;
  auto& md = w.metadata();
  md.set("deepseek2.attention.kv_lora_rank", Value{uint32_t{512}});
  md.set("neg", Value{int32_t{-1}});
  md.set("big", Value{uint64_t{1} << 40});
  md.set("name", Value{std::string("x")});
  md.set("f", Value{0.5f});
  md.set("flag", Value{true});
  md.set("ints", array_of(ValueType::I32, {Value{int32_t{1}}, Value{int32_t{-2}}}));
  md.set("strs", array_of(ValueType::STRING, {Value{std::string("a")}}));
  w.write(path("acc.gguf"));
  GgufFile f(path("acc.gguf"));
  const ggl::Metadata& m = f.metadata();
  const std::string file = path("acc.gguf");

  EXPECT_EQ(m.get<uint32_t>("deepseek2.attention.kv_lora_rank"), 512u);
  EXPECT_EQ(m.get<int64_t>("deepseek2.attention.kv_lora_rank"), 512);
  EXPECT_EQ(m.get<uint16_t>("deepseek2.attention.kv_lora_rank"), 512);
  EXPECT_EQ(m.get<int32_t>("neg"), -1);
  EXPECT_EQ(m.get<double>("f"), 0.5);
  EXPECT_TRUE(m.get<bool>("flag"));
  EXPECT_EQ(m.get<std::vector<int64_t>>("ints"), (std::vector<int64_t>{1, -2}));
  EXPECT_EQ(m.get_or<uint32_t>("absent", 7u), 7u);
  EXPECT_EQ(m.get_or<std::string>("name", "fallback"), "x");

  expect_error([&] { m.get<uint32_t>("deepseek2.attention.q_lora_rank"); },
               file + ": missing metadata key 'deepseek2.attention.q_lora_rank'");
  expect_error([&] { m.get<uint32_t>("name"); }, file + ": metadata key 'name' is string, expected u32");
  expect_error([&] { m.get<uint32_t>("neg"); }, file + ": metadata key 'neg' = -1 (i32) does not fit in u32");
  expect_error([&] { m.get<uint8_t>("deepseek2.attention.kv_lora_rank"); }, "= 512 (u32) does not fit in u8");
  expect_error([&] { m.get<int32_t>("big"); }, "= 1099511627776 (u64) does not fit in i32");
  expect_error([&] { m.get<float>("flag"); }, "metadata key 'flag' is bool, expected float");
  expect_error([&] { m.get<bool>("neg"); }, "metadata key 'neg' is i32, expected bool");
  expect_error([&] { m.get<std::string>("ints"); }, "metadata key 'ints' is array, expected string");
  expect_error([&] { m.get<std::vector<float>>("name"); }, "metadata key 'name' is string, expected an array of float");
  expect_error([&] { m.get<std::vector<std::string>>("ints"); }, "is an array of i32, expected an array of string");
  expect_error([&] { m.get<std::vector<uint32_t>>("ints"); }, "metadata key 'ints' item 1 = -2 does not fit in u32");
  expect_error([&] { m.get<std::vector<int32_t>>("strs"); }, "is an array of string, expected an array of i32");
}

TEST_F(GgufTest, MissingFileAndDirectoryAreErrors) {
  expect_error([&] { GgufFile f(path("absent.gguf")); }, path("absent.gguf") + ": cannot open");
  expect_error([&] { GgufFile f(dir_.string()); }, dir_.string() + ": not a regular file");
}

}  // namespace test_gguf
