// The safetensors reader: dtypes and shapes, float conversion, sharded checkpoints, and one-line
// errors for every kind of broken file.
#include <gtest/gtest.h>

#include <fstream>

#include "convert/safetensors.h"
#include "tests/support/convert_support.h"

namespace test_safetensors {

using namespace latte::convert_test;
using latte::convert::SafetensorsCheckpoint;
using latte::convert::SafetensorsFile;
using latte::convert::StDtype;

HfWeights two_tensors() {
  HfWeights w;
  w.add("a", HfTensor{{2, 3}, {1.0f, -2.5f, 3.25f, 0.0f, 65504.0f, -1e-3f}});
  w.add("b.weight", HfTensor{{4}, {0.5f, 0.25f, -0.125f, 7.0f}});
  return w;
}

// Writes raw bytes: an 8-byte length and the header text, then `data`.
void write_raw(const fs::path& path, const std::string& header, const std::string& data, int64_t len = -1) {
  uint64_t n = len < 0 ? header.size() : static_cast<uint64_t>(len);
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}

void expect_error(const fs::path& path, const std::string& expected) {
  try {
    SafetensorsFile f(path.string());
    ADD_FAILURE() << "no error for " << path << " (expected '" << expected << "')";
  } catch (const ggl::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(expected), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_EQ(msg.rfind(path.string(), 0), 0u) << "error should start with the file name: " << msg;
  }
}

TEST(Safetensors, ReadsEveryFloatDtype) {
  const fs::path dir = fresh_dir("st-dtypes");
  for (Dtype d : {Dtype::F32, Dtype::F16, Dtype::BF16}) {
    HfWeights w = two_tensors();
    for (auto& [name, t] : w.by_name) round_to(d, t.data);
    const fs::path path = dir / (std::string(dtype_text(d)) + ".safetensors");
    write_safetensors(path, w, w.order, d);
    SafetensorsFile f(path.string());
    ASSERT_EQ(f.tensors().size(), 2u);
    EXPECT_EQ(f.metadata().at("format"), "pt");
    const auto* a = f.find("a");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(latte::convert::dtype_name(a->dtype), dtype_text(d));
    EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(a->shape_text(), "[2, 3]");
    std::vector<float> got(6);
    latte::convert::read_f32(*a, 0, 6, got.data());
    EXPECT_EQ(got, w.at("a").data) << dtype_text(d);
    // A sub-range, as the converters read rows.
    std::vector<float> tail(2);
    latte::convert::read_f32(*f.find("b.weight"), 2, 2, tail.data());
    EXPECT_EQ(tail, (std::vector<float>{w.at("b.weight").data[2], w.at("b.weight").data[3]}));
    // Dropping the pages loses nothing.
    f.release(*a);
    latte::convert::read_f32(*a, 0, 6, got.data());
    EXPECT_EQ(got, w.at("a").data);
    EXPECT_EQ(f.find("missing"), nullptr);
  }
}

TEST(Safetensors, SixteenBitDataAtAnOddAddress) {
  // A header of odd length puts 16-bit values at odd addresses: still read correctly.
  HfWeights w = two_tensors();
  round_to(Dtype::BF16, w.by_name["a"].data);
  const fs::path path = fresh_dir("st-odd") / "odd.safetensors";
  write_safetensors(path, w, {"a"}, Dtype::BF16, /*header_pad=*/1);
  std::ifstream in(path, std::ios::binary);
  uint64_t len = 0;
  in.read(reinterpret_cast<char*>(&len), 8);
  if (len % 2 == 0) {  // make it odd with one more space
    std::string rest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    write_raw(path, rest.substr(0, len) + " ", rest.substr(len));
  }
  SafetensorsFile f(path.string());
  std::vector<float> got(6);
  latte::convert::read_f32(*f.find("a"), 0, 6, got.data());
  EXPECT_EQ(got, w.at("a").data);
}

TEST(Safetensors, ShardedCheckpoint) {
  HfWeights w;
  Rng rng(3);
  for (int i = 0; i < 7; ++i) w.add(std::string("t") + std::to_string(i), random_matrix(rng, 3, 5));
  const fs::path dir = fresh_dir("st-sharded");
  write_checkpoint(dir, json{{"architectures", {"X"}}}, w, Dtype::F16, 3);
  SafetensorsCheckpoint ck(dir.string());
  EXPECT_EQ(ck.shard_count(), 3u);
  EXPECT_EQ(ck.all().size(), 7u);
  EXPECT_EQ(ck.total_bytes(), 7u * 15 * 2);
  for (const std::string& n : w.order) {
    std::vector<float> got(15);
    latte::convert::read_f32(ck.get(n), 0, 15, got.data());
    EXPECT_EQ(got, w.at(n).data) << n;
  }
  try {
    ck.get("nope");
    ADD_FAILURE();
  } catch (const ggl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint has no tensor 'nope'"), std::string::npos);
  }
}

TEST(Safetensors, SingleFileCheckpointAndMissingWeights) {
  HfWeights w = two_tensors();
  const fs::path dir = fresh_dir("st-single");
  write_checkpoint(dir, json::object(), w, Dtype::F32);
  SafetensorsCheckpoint ck(dir.string());
  EXPECT_EQ(ck.shard_count(), 1u);
  EXPECT_NE(ck.find("a"), nullptr);

  const fs::path empty = fresh_dir("st-none");
  EXPECT_THROW(SafetensorsCheckpoint(empty.string()), ggl::Error);
  std::ofstream(empty / "pytorch_model.bin") << "x";
  try {
    SafetensorsCheckpoint c(empty.string());
    ADD_FAILURE();
  } catch (const ggl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("only PyTorch .bin weights"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, IndexErrors) {
  HfWeights w;
  Rng rng(4);
  for (int i = 0; i < 4; ++i) w.add(std::string("t") + std::to_string(i), random_matrix(rng, 2, 2));
  const fs::path dir = fresh_dir("st-index");
  write_checkpoint(dir, json::object(), w, Dtype::F32, 2);
  auto expect_fail = [&](const json& index, const std::string& expected) {
    std::ofstream(dir / "model.safetensors.index.json", std::ios::trunc) << index.dump();
    try {
      SafetensorsCheckpoint ck(dir.string());
      ADD_FAILURE() << "no error, expected " << expected;
    } catch (const ggl::Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  const json good = read_json(dir / "model.safetensors.index.json");
  json j = good;
  j["weight_map"]["t9"] = "model-00009-of-00009.safetensors";
  expect_fail(j, "model-00009-of-00009.safetensors: shard listed in model.safetensors.index.json is missing");
  j = good;
  j["weight_map"]["t0"] = "model-00002-of-00002.safetensors";  // t0 lives in shard 1
  expect_fail(j, "places tensor 't0' in this shard, but it is not there");
  j = good;
  j["weight_map"]["t0"] = "../etc/passwd";
  expect_fail(j, "is not a plain file name");
  expect_fail(json{{"metadata", {}}}, "no \"weight_map\" object");
  std::ofstream(dir / "model.safetensors.index.json", std::ios::trunc) << "{ not json";
  EXPECT_THROW(SafetensorsCheckpoint(dir.string()), ggl::Error);
  // The same tensor in two shards.
  std::ofstream(dir / "model.safetensors.index.json", std::ios::trunc) << good.dump();
  write_safetensors(dir / "model-00002-of-00002.safetensors", w, {"t2", "t3", "t0"}, Dtype::F32);
  try {
    SafetensorsCheckpoint ck(dir.string());
    ADD_FAILURE();
  } catch (const ggl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 't0' is also in"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, MalformedFilesAreOneLineErrors) {
  const fs::path dir = fresh_dir("st-bad");
  const std::string ok_header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data(8, '\0');
  auto raw = [&](const std::string& name, const std::string& header, const std::string& d, int64_t len = -1) {
    write_raw(dir / name, header, d, len);
    return dir / name;
  };
  {
    std::ofstream(dir / "short.safetensors") << "abc";
    expect_error(dir / "short.safetensors", "shorter than the 8-byte header length");
  }
  expect_error(raw("len.safetensors", ok_header, data, 1 << 20), "header length 1048576 is beyond the end");
  expect_error(raw("json.safetensors", "{\"x\": [1, 2,", data), "safetensors header is not valid JSON");
  expect_error(raw("array.safetensors", "[1, 2, 3]", data), "header is not a JSON object");
  expect_error(raw("nodtype.safetensors", R"({"x":{"shape":[2],"data_offsets":[0,8]}})", data), "has no dtype");
  expect_error(raw("dtype.safetensors", R"({"x":{"dtype":"F7","shape":[2],"data_offsets":[0,8]}})", data),
               "unknown dtype 'F7'");
  expect_error(raw("shape.safetensors", R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data),
               "non-integer or negative dimension");
  expect_error(raw("off.safetensors", R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", data),
               "are outside the 8 data bytes");
  expect_error(raw("order.safetensors", R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", data),
               "data_offsets [8, 0]");
  expect_error(raw("size.safetensors", R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data),
               "has 8 data bytes but F32 [3] needs 12");
  expect_error(raw("overlap.safetensors",
                   R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                   R"("y":{"dtype":"F16","shape":[2],"data_offsets":[4,8]}})",
                   data),
               "overlap");
  expect_error(raw("meta.safetensors", R"({"__metadata__":{"a":1}})", ""), "__metadata__ value 'a' is not a string");
  expect_error(raw("overflow.safetensors",
                   R"({"x":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,8]}})", data),
               "overflows");
  expect_error(dir / "does-not-exist.safetensors", "cannot open");
  // A hostile name is escaped, keeping the message on one line.
  expect_error(raw("name.safetensors", "{\"bad\\nname\":{\"dtype\":\"F7\",\"shape\":[],\"data_offsets\":[0,0]}}", ""),
               "bad\\x0aname");
}

TEST(Safetensors, NonFloatDtypeIsRejectedWhenRead) {
  const fs::path path = fresh_dir("st-int") / "int.safetensors";
  write_raw(path, R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", std::string(16, '\1'));
  SafetensorsFile f(path.string());
  std::vector<float> out(2);
  try {
    latte::convert::read_f32(*f.find("ids"), 0, 2, out.data());
    ADD_FAILURE();
  } catch (const ggl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("has dtype I64; latte converts F32, F16 and BF16 weights"), std::string::npos);
  }
  EXPECT_THROW(latte::convert::read_f32(*f.find("ids"), 1, 5, out.data()), ggl::Error);
}

}  // namespace test_safetensors
