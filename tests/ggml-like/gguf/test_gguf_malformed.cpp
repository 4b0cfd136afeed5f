// The checked-in corpus of malformed GGUF files (tests/data/malformed, made by generate.py there):
// each must be rejected with a one-line ggl::Error naming the file and the defect, both when
// mapped from disk and when parsed from memory. The valid seeds the corpus is derived from must load.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ggml-like/gguf/gguf.h"
#include "tests/support/test_support.h"

namespace test_gguf_malformed {

namespace fs = std::filesystem;

fs::path malformed_dir() { return latte::testing::test_data_dir() / "malformed"; }
fs::path seeds_dir() { return latte::testing::test_data_dir() / ".." / "fuzz" / "seeds"; }

// file name -> expected substring of the error.
std::map<std::string, std::string> read_manifest() {
  std::map<std::string, std::string> out;
  std::ifstream in(malformed_dir() / "MANIFEST.tsv");
  EXPECT_TRUE(in) << "missing " << (malformed_dir() / "MANIFEST.tsv");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t tab = line.find('\t');
    EXPECT_NE(tab, std::string::npos) << "bad manifest line: " << line;
    if (tab == std::string::npos) continue;
    EXPECT_TRUE(out.emplace(line.substr(0, tab), line.substr(tab + 1)).second) << "listed twice: " << line;
  }
  return out;
}

std::vector<std::string> gguf_files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".gguf") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(GgufMalformed, ManifestAndDirectoryAgree) {
  auto manifest = read_manifest();
  std::set<std::string> on_disk;
  for (const std::string& name : gguf_files_in(malformed_dir())) {
    on_disk.insert(name);
    EXPECT_TRUE(manifest.count(name)) << name << " is not in MANIFEST.tsv";
  }
  for (const auto& [name, expect] : manifest) EXPECT_TRUE(on_disk.count(name)) << name << " listed but missing";
  EXPECT_GE(on_disk.size(), 30u);
}

TEST(GgufMalformed, EveryFileIsRejectedWithItsOwnError) {
  auto manifest = read_manifest();
  ASSERT_FALSE(manifest.empty());
  for (const auto& [name, expect] : manifest) {
    const std::string path = (malformed_dir() / name).string();
    SCOPED_TRACE(name);
    try {
      ggl::GgufFile file(path);
      ADD_FAILURE() << name << " was accepted";
    } catch (const ggl::Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << "error does not start with the file name: " << msg;
      EXPECT_NE(msg.find(expect), std::string::npos) << "expected '" << expect << "' in: " << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
    }
  }
}

TEST(GgufMalformed, MemoryParserGivesTheSameErrors) {
  for (const auto& [name, expect] : read_manifest()) {
    SCOPED_TRACE(name);
    std::vector<uint8_t> bytes = read_bytes(malformed_dir() / name);
    try {
      ggl::GgufFile::from_memory("mem:" + name, bytes.data(), bytes.size());
      ADD_FAILURE() << name << " was accepted";
    } catch (const ggl::Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(msg.rfind("mem:" + name + ": ", 0), 0u) << msg;
      EXPECT_NE(msg.find(expect), std::string::npos) << "expected '" << expect << "' in: " << msg;
    }
  }
}

// Every defect is one edit of these files, so they loading proves the edit is what is rejected.
TEST(GgufMalformed, ValidSeedsLoad) {
  std::vector<std::string> seeds = gguf_files_in(seeds_dir());
  ASSERT_GE(seeds.size(), 3u);
  for (const std::string& name : seeds) {
    SCOPED_TRACE(name);
    ggl::GgufFile file((seeds_dir() / name).string());
    EXPECT_EQ(file.metadata().get<std::string>("general.architecture"), "test");
    EXPECT_EQ(file.metadata().get<std::vector<std::string>>("tokenizer.ggml.tokens"),
              (std::vector<std::string>{"<s>", "a", "bc"}));
    for (const ggl::TensorInfo& t : file.tensors()) {
      EXPECT_EQ(t.offset % file.alignment(), 0u);
      EXPECT_EQ(file.data_offset() % file.alignment(), 0u);
      EXPECT_EQ(t.nbytes, ggl::row_bytes(t.type, t.ne[0]) * static_cast<size_t>(t.n_elements() / t.ne[0]));
    }
  }
}

}  // namespace test_gguf_malformed
