// Every GGUF file in ../shared (fixtures/, models/, vocab/) must load, and rewriting it with the
// writer (same metadata, same tensor bytes) must give a file that reads back identically. The
// writer's layout is the reference writer's, so the rewrite is also expected byte for byte equal.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ggml-like/gguf/gguf.h"
#include "tests/support/gguf_test_util.h"
#include "tests/support/test_support.h"

namespace test_gguf_shared {

namespace fs = std::filesystem;

std::vector<fs::path> shared_gguf_files() {
  std::vector<fs::path> out;
  for (const char* sub : {"fixtures", "models", "vocab"}) {
    fs::path dir = latte::testing::shared_dir() / sub;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".gguf") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

using latte::testing::same_value;

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(GgufShared, EveryFileLoadsWithSaneTensors) {
  for (const char* sub : {"fixtures", "models", "vocab"}) LATTE_REQUIRE_SHARED(sub);
  auto files = shared_gguf_files();
  EXPECT_GE(files.size(), 10u);
  for (const fs::path& p : files) {
    SCOPED_TRACE(p.string());
    ggl::GgufFile f(p.string());
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.file_size(), fs::file_size(p));
    EXPECT_TRUE(f.metadata().has("general.architecture") || f.metadata().has("tokenizer.ggml.model"));
    for (const ggl::TensorInfo& t : f.tensors()) {
      EXPECT_EQ(t.offset % f.alignment(), 0u) << t.name;
      EXPECT_LE(f.data_offset() + t.offset + t.nbytes, f.file_size()) << t.name;
      EXPECT_EQ(t.nbytes, ggl::row_bytes(t.type, t.ne[0]) * static_cast<size_t>(t.n_elements() / t.ne[0]));
    }
  }
}

TEST(GgufShared, RewriteReadsBackIdenticallyAndIsByteIdentical) {
  for (const char* sub : {"fixtures", "models", "vocab"}) LATTE_REQUIRE_SHARED(sub);
  auto files = shared_gguf_files();
  const fs::path out = fs::temp_directory_path() / ("latte-gguf-rewrite-" + std::to_string(::getpid()) + ".gguf");
  for (const fs::path& p : files) {
    SCOPED_TRACE(p.string());
    ggl::GgufFile original(p.string());
    ggl::GgufWriter w(static_cast<uint32_t>(original.alignment()));
    for (const auto& [key, value] : original.metadata().entries()) w.metadata().set(key, value);
    for (const ggl::TensorInfo& t : original.tensors())
      w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
    w.write(out.string());

    ggl::GgufFile copy(out.string());
    const auto& a = original.metadata().entries();
    const auto& b = copy.metadata().entries();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].first, b[i].first);
      EXPECT_TRUE(same_value(a[i].second, b[i].second)) << a[i].first;
    }
    ASSERT_EQ(original.tensors().size(), copy.tensors().size());
    for (size_t i = 0; i < original.tensors().size(); ++i) {
      const ggl::TensorInfo& x = original.tensors()[i];
      const ggl::TensorInfo& y = copy.tensors()[i];
      EXPECT_EQ(x.name, y.name);
      EXPECT_EQ(x.type, y.type);
      EXPECT_EQ(x.n_dims, y.n_dims);
      EXPECT_TRUE(std::equal(x.ne, x.ne + ggl::kMaxDims, y.ne));
      ASSERT_EQ(x.nbytes, y.nbytes);
      EXPECT_EQ(std::memcmp(x.data, y.data, x.nbytes), 0) << x.name;
    }
    EXPECT_TRUE(read_bytes(p) == read_bytes(out)) << "rewrite of " << p << " is not byte-identical";
  }
  fs::remove(out);
}

}  // namespace test_gguf_shared
