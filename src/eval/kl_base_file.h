// llama-perplexity's --kl-divergence-base file: a base model's log-probabilities over a text, to
// compare another model (usually a quantization of it) against. Little-endian:
//
//   "_logits_"  int32 n_ctx  int32 n_vocab  int32 n_chunk  int32 tokens[n_chunk * n_ctx]
//   then per chunk, per scored position (the last n_ctx - 1 - n_ctx/2 of the chunk but one):
//   uint16 row[compressed_row_size(n_vocab)]  (log_probs.h)
//
// The tokens are the text's, before the BOS that replaces each chunk's first one when evaluated.
// Files are interchangeable with llama.cpp's.
#pragma once
#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace latte::eval {

struct KlBaseHeader {
  int64_t n_ctx = 0;
  int64_t n_vocab = 0;
  int64_t n_chunk = 0;
  std::vector<int32_t> tokens;  // n_chunk * n_ctx

  // Positions scored per chunk: n_ctx/2 .. n_ctx-2 predict the tokens after them.
  int64_t scored_per_chunk() const { return n_ctx - 1 - n_ctx / 2; }
};

class KlBaseWriter {
 public:
  // Creates the file and writes the header; throws ggl::Error naming the path.
  KlBaseWriter(std::string path, const KlBaseHeader& header);
  // One chunk's rows, scored_per_chunk() * compressed_row_size(n_vocab) values.
  void write_chunk(std::span<const uint16_t> rows);
  // Flushes and checks that every write reached the file.
  void close();

 private:
  void check(const char* what);
  std::string path_;
  std::ofstream out_;
};

class KlBaseReader {
 public:
  // Opens and checks the whole file's layout (magic, sizes, its length against the header);
  // throws ggl::Error naming the path and the problem.
  explicit KlBaseReader(std::string path);
  const KlBaseHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  // The next chunk's rows into rows (resized).
  void read_chunk(std::vector<uint16_t>& rows);

 private:
  std::string path_;
  std::ifstream in_;
  KlBaseHeader header_;
};

}  // namespace latte::eval
