// Helpers shared by the tokenizer and detokenizer suites.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ggml-like/gguf/gguf.h"
#include "src/tokenizer/utf8.h"

namespace latte::testing {

// Random valid UTF-8 mixing the scripts and oddities tokenizers trip over: ASCII, whitespace of
// all kinds, control characters, accented Latin, Greek, Cyrillic, combining marks, Arabic digits,
// Devanagari, Thai, CJK, Hangul, kana, emoji (with ZWJ and variation selectors), astral symbols.
inline std::string random_utf8(std::mt19937& rng, int max_code_points) {
  static const std::vector<std::pair<uint32_t, uint32_t>> kRanges = {
      {0x20, 0x7E},     {0x20, 0x7E},     {0x20, 0x20},       {0x09, 0x0D},       {0x01, 0x1F},     {0x7F, 0x7F},
      {0x85, 0x85},     {0xA0, 0xA0},     {0x2000, 0x200D},   {0x3000, 0x3002},   {0xC0, 0x24F},    {0x370, 0x3FF},
      {0x400, 0x4FF},   {0x300, 0x36F},   {0x660, 0x669},     {0x900, 0x97F},     {0xE00, 0xE5B},   {0x4E00, 0x9FFF},
      {0xAC00, 0xD7A3}, {0x3040, 0x30FF}, {0x1F300, 0x1FAFF}, {0x1F600, 0x1F64F}, {0xFE0F, 0xFE0F}, {0x1D400, 0x1D7FF},
      {0xFF01, 0xFF5E}, {0x2018, 0x201F}, {0x10000, 0x1007F}, {0xE000, 0xE0FF},
  };
  std::uniform_int_distribution<int> n_dist(0, max_code_points);
  std::uniform_int_distribution<size_t> range_dist(0, kRanges.size() - 1);
  std::string s;
  for (int n = n_dist(rng); n > 0; --n) {
    auto [lo, hi] = kRanges[range_dist(rng)];
    latte::utf8::append(s, std::uniform_int_distribution<uint32_t>(lo, hi)(rng));
  }
  return s;
}

inline bool is_valid_utf8(std::string_view s) {
  while (!s.empty()) {
    int n = latte::utf8::valid_char_length(s);
    if (n == 0) return false;
    s.remove_prefix(n);
  }
  return true;
}

// Metadata for small hand-made vocabularies.
inline ggl::Value string_value(std::string s) { return ggl::Value{std::move(s)}; }

inline ggl::Value string_array(const std::vector<std::string>& items) {
  ggl::Array a;
  a.element_type = ggl::ValueType::STRING;
  for (const auto& s : items) a.items.push_back(ggl::Value{s});
  return ggl::Value{std::move(a)};
}

inline ggl::Value int_array(const std::vector<int32_t>& items) {
  ggl::Array a;
  a.element_type = ggl::ValueType::I32;
  for (int32_t v : items) a.items.push_back(ggl::Value{v});
  return ggl::Value{std::move(a)};
}

inline ggl::Value float_array(const std::vector<float>& items) {
  ggl::Array a;
  a.element_type = ggl::ValueType::F32;
  for (float v : items) a.items.push_back(ggl::Value{v});
  return ggl::Value{std::move(a)};
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The texts of a ../shared/vocab/NAME.gguf.inp file: joined with "\n__ggml_vocab_test__\n", and
// the file ends with that separator.
inline std::vector<std::string> read_vocab_texts(const std::filesystem::path& path) {
  const std::string sep = "\n__ggml_vocab_test__\n", all = read_file(path);
  std::vector<std::string> texts;
  size_t pos = 0;
  for (size_t hit; (hit = all.find(sep, pos)) != std::string::npos; pos = hit + sep.size())
    texts.push_back(all.substr(pos, hit - pos));
  if (pos < all.size()) texts.push_back(all.substr(pos));
  return texts;
}

// The expected ids of a NAME.gguf.out file, one line per text.
inline std::vector<std::vector<int32_t>> read_vocab_ids(const std::filesystem::path& path) {
  std::istringstream in(read_file(path));
  std::vector<std::vector<int32_t>> lines;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::vector<int32_t> ids;
    for (int32_t id; words >> id;) ids.push_back(id);
    lines.push_back(std::move(ids));
  }
  return lines;
}

}  // namespace latte::testing
