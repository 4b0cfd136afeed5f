#include "src/eval/kl_base_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ggml-like/core/error.h"
#include "src/eval/log_probs.h"

namespace latte::eval {
namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};

template <class T>
void put(std::ofstream& out, T v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof v);
}

}  // namespace

KlBaseWriter::KlBaseWriter(std::string path, const KlBaseHeader& h) : path_(std::move(path)) {
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) ggl::fail("{}: cannot write the KL divergence base ({})", path_, std::strerror(errno));
  out_.write(kMagic, sizeof kMagic);
  put(out_, static_cast<int32_t>(h.n_ctx));
  put(out_, static_cast<int32_t>(h.n_vocab));
  put(out_, static_cast<int32_t>(h.n_chunk));
  out_.write(reinterpret_cast<const char*>(h.tokens.data()),
             static_cast<std::streamsize>(h.tokens.size() * sizeof(int32_t)));
  check("the header");
}

void KlBaseWriter::write_chunk(std::span<const uint16_t> rows) {
  out_.write(reinterpret_cast<const char*>(rows.data()), static_cast<std::streamsize>(rows.size_bytes()));
  check("log-probabilities");
}

void KlBaseWriter::close() {
  out_.flush();
  check("the end of the file");
  out_.close();
}

void KlBaseWriter::check(const char* what) {
  if (!out_) ggl::fail("{}: writing {} failed ({})", path_, what, std::strerror(errno));
}

KlBaseReader::KlBaseReader(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  if (std::filesystem::is_directory(path_, ec)) ggl::fail("{}: is a directory, not a KL divergence base", path_);
  in_.open(path_, std::ios::binary);
  if (!in_) ggl::fail("{}: cannot open the KL divergence base ({})", path_, std::strerror(errno));
  const uint64_t size = std::filesystem::file_size(path_, ec);
  char magic[sizeof kMagic] = {};
  int32_t dims[3] = {};
  in_.read(magic, sizeof magic);
  if (!in_ || std::memcmp(magic, kMagic, sizeof kMagic) != 0)
    ggl::fail("{}: not a KL divergence base (no \"_logits_\" header: write one with --kl-divergence-base)", path_);
  in_.read(reinterpret_cast<char*>(dims), sizeof dims);
  if (!in_) ggl::fail("{}: truncated KL divergence base (its header)", path_);
  header_.n_ctx = dims[0];
  header_.n_vocab = dims[1];
  header_.n_chunk = dims[2];
  if (header_.n_ctx < 4 || header_.n_vocab < 1 || header_.n_chunk < 1)
    ggl::fail("{}: corrupt KL divergence base (n_ctx {}, n_vocab {}, {} chunks)", path_, header_.n_ctx, header_.n_vocab,
              header_.n_chunk);
  const uint64_t n_tokens = static_cast<uint64_t>(header_.n_ctx) * static_cast<uint64_t>(header_.n_chunk);
  const uint64_t rows = static_cast<uint64_t>(header_.scored_per_chunk()) * static_cast<uint64_t>(header_.n_chunk);
  const uint64_t expected = sizeof kMagic + sizeof dims + n_tokens * sizeof(int32_t) +
                            rows * static_cast<uint64_t>(compressed_row_size(header_.n_vocab)) * sizeof(uint16_t);
  if (size != expected)
    ggl::fail("{}: {} bytes, but its header (n_ctx {}, n_vocab {}, {} chunks) needs {}", path_, size, header_.n_ctx,
              header_.n_vocab, header_.n_chunk, expected);
  header_.tokens.resize(n_tokens);
  in_.read(reinterpret_cast<char*>(header_.tokens.data()), static_cast<std::streamsize>(n_tokens * sizeof(int32_t)));
  if (!in_) ggl::fail("{}: truncated KL divergence base (its tokens)", path_);
}

void KlBaseReader::read_chunk(std::vector<uint16_t>& rows) {
  rows.resize(static_cast<size_t>(header_.scored_per_chunk() * compressed_row_size(header_.n_vocab)));
  in_.read(reinterpret_cast<char*>(rows.data()), static_cast<std::streamsize>(rows.size() * sizeof(uint16_t)));
  if (!in_) ggl::fail("{}: truncated KL divergence base (its log-probabilities)", path_);
}

}  // namespace latte::eval
