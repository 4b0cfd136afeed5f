#include "src/runtime/cache_io.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string_view>
#include <system_error>

#include "ggml-like/core/error.h"

namespace latte {
namespace {

static_assert(std::endian::native == std::endian::little, "cache files are written in host (little-endian) order");

constexpr char kMagic[8] = {'L', 'A', 'T', 'T', 'E', 'K', 'V', '\0'};
constexpr uint32_t kVersion = 1;

struct Header {
  uint32_t version = kVersion;
  uint32_t arch = 0;
  uint32_t type = 0;
  uint32_t streams = 0;
  int64_t n_layer = 0;
  int64_t width[2] = {0, 0};
  int64_t n_embd = 0;
  int64_t n_vocab = 0;
  uint64_t model_bytes = 0;
  int64_t n_tokens = 0;
  uint64_t tokens_hash = 0;
};

uint64_t fnv1a(std::span<const int32_t> tokens) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int32_t t : tokens)
    for (int i = 0; i < 4; ++i) {
      h ^= static_cast<uint32_t>(t) >> (8 * i) & 0xffu;
      h *= 0x100000001b3ull;
    }
  return h;
}

// What the header of this session's cache holding `tokens` says.
Header describe(const Session& s, std::span<const int32_t> tokens) {
  const Hparams& hp = s.model().hparams();
  const KvCache& c = s.cache();
  Header h;
  h.arch = static_cast<uint32_t>(hp.arch);
  h.type = static_cast<uint32_t>(c.type());
  h.streams = static_cast<uint32_t>(c.layout().streams);
  h.n_layer = c.n_layer();
  h.width[0] = c.layout().width[0];
  h.width[1] = c.layout().width[1];
  h.n_embd = hp.n_embd;
  h.n_vocab = hp.n_vocab;
  h.model_bytes = s.model().file().file_size();
  h.n_tokens = static_cast<int64_t>(tokens.size());
  h.tokens_hash = fnv1a(tokens);
  return h;
}

class Bytes {
 public:
  template <typename T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    buf_.insert(buf_.end(), p, p + sizeof v);
  }
  const std::vector<uint8_t>& data() const { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

std::vector<uint8_t> encode(const Header& h) {
  Bytes b;
  for (char c : kMagic) b.put(c);
  b.put(h.version), b.put(h.arch), b.put(h.type), b.put(h.streams);
  b.put(h.n_layer), b.put(h.width[0]), b.put(h.width[1]), b.put(h.n_embd), b.put(h.n_vocab);
  b.put(h.model_bytes), b.put(h.n_tokens), b.put(h.tokens_hash);
  return b.data();
}

Header decode(const uint8_t* p, const std::string& path) {
  if (std::memcmp(p, kMagic, sizeof kMagic) != 0) ggl::fail("{}: not a latte cache file (bad magic)", path);
  p += sizeof kMagic;
  auto take = [&p](auto& v) {
    std::memcpy(&v, p, sizeof v);
    p += sizeof v;
  };
  Header h;
  take(h.version);
  if (h.version != kVersion)
    ggl::fail("{}: cache file version {} (this latte reads version {})", path, h.version, kVersion);
  take(h.arch), take(h.type), take(h.streams);
  take(h.n_layer), take(h.width[0]), take(h.width[1]), take(h.n_embd), take(h.n_vocab);
  take(h.model_bytes), take(h.n_tokens), take(h.tokens_hash);
  return h;
}

// The first field where the file and the session disagree, as a sentence, or "".
std::string mismatch(const Header& file, const Header& want) {
  if (file.arch != want.arch || file.streams != want.streams || file.n_layer != want.n_layer ||
      file.width[0] != want.width[0] || file.width[1] != want.width[1] || file.n_embd != want.n_embd ||
      file.n_vocab != want.n_vocab || file.model_bytes != want.model_bytes)
    return "it was saved for another model";
  if (file.type != want.type)
    return "it holds a " + std::string(ggl::type_name(static_cast<ggl::Type>(file.type))) +
           " cache, this session uses " + std::string(ggl::type_name(static_cast<ggl::Type>(want.type))) +
           " (--cache-type)";
  if (file.n_tokens != want.n_tokens)
    return "it holds " + std::to_string(file.n_tokens) + " tokens, the conversation " + std::to_string(want.n_tokens);
  if (file.tokens_hash != want.tokens_hash) return "it was computed from other token ids than the conversation's";
  return "";
}

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

}  // namespace

size_t cache_file_bytes(const Session& session, int64_t n_tokens) {
  return kCacheFileHeaderBytes + session.cache().bytes_per_token() * static_cast<size_t>(n_tokens);
}

size_t save_cache(const Session& session, std::span<const int32_t> tokens, const std::string& path) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n > session.n_past()) ggl::fail("{}: {} token ids given for a cache of {} tokens", path, n, session.n_past());
  const std::vector<uint8_t> header = encode(describe(session, tokens));
  const std::string tmp = path + ".tmp";
  {
    File f(std::fopen(tmp.c_str(), "wb"));
    if (!f) ggl::fail("{}: cannot write the cache file: {}", path, std::strerror(errno));
    bool ok = std::fwrite(header.data(), 1, header.size(), f.get()) == header.size();
    const KvCache& c = session.cache();
    std::vector<uint8_t> rows;  // a device layer's rows, downloaded
    for (int64_t il = 0; ok && il < c.n_layer(); ++il)
      for (int s = 0; ok && s < c.layout().streams; ++s) {
        const size_t bytes = c.row_bytes(s) * static_cast<size_t>(n);
        const uint8_t* from = c.data(il, s);
        if (c.device(il)) {
          rows.resize(bytes);
          c.read_rows(il, s, 0, n, rows.data());
          from = rows.data();
        }
        ok = std::fwrite(from, 1, bytes, f.get()) == bytes;
      }
    if (!ok || std::fflush(f.get()) != 0) {
      const std::string why = std::strerror(errno);
      f.reset();
      std::remove(tmp.c_str());
      ggl::fail("{}: cannot write the cache file: {}", path, why);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    ggl::fail("{}: cannot write the cache file: {}", path, ec.message());
  }
  return cache_file_bytes(session, n);
}

size_t load_cache(Session& session, std::span<const int32_t> tokens, const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) ggl::fail("{}: cannot open the cache file: {}", path, std::strerror(errno));
  uint8_t raw[kCacheFileHeaderBytes];
  if (std::fread(raw, 1, sizeof raw, f.get()) != sizeof raw) ggl::fail("{}: not a latte cache file (too short)", path);
  const Header file = decode(raw, path);
  if (const std::string why = mismatch(file, describe(session, tokens)); !why.empty())
    ggl::fail("{}: cannot use this cache: {}", path, why);
  const int64_t n = file.n_tokens;
  if (n > session.n_ctx())
    ggl::fail("{}: the cache holds {} tokens, more than the context of {} (raise -c)", path, n, session.n_ctx());
  const size_t expected = cache_file_bytes(session, n);
  std::error_code ec;
  const auto actual = std::filesystem::file_size(path, ec);
  if (ec || actual != expected)
    ggl::fail("{}: the cache file has {} bytes, {} expected for {} tokens (truncated or damaged)", path,
              ec ? 0 : actual, expected, n);

  const KvCache& c = session.cache();
  std::vector<uint8_t> rows;  // a device layer's rows, uploaded after reading
  for (int64_t il = 0; il < c.n_layer(); ++il)
    for (int s = 0; s < c.layout().streams; ++s) {
      const size_t bytes = c.row_bytes(s) * static_cast<size_t>(n);
      if (c.device(il)) rows.resize(bytes);
      uint8_t* into = c.device(il) ? rows.data() : c.data(il, s);
      if (std::fread(into, 1, bytes, f.get()) != bytes) {
        session.clear();  // rows were partly overwritten: nothing cached is valid any more
        ggl::fail("{}: read error in the cache file", path);
      }
      if (c.device(il)) c.write_rows(il, s, 0, n, rows.data());
    }
  session.set_n_past(n);
  return expected;
}

}  // namespace latte
