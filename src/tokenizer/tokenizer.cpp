#include "src/tokenizer/tokenizer.h"

#include "src/tokenizer/bpe_tokenizer.h"
#include "src/tokenizer/byte_level.h"
#include "src/tokenizer/pre_tokenizer.h"
#include "src/tokenizer/spm_tokenizer.h"

namespace latte {

namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // ▁ U+2581, SentencePiece's space

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string_view::npos; pos = hit + from.size()) {
    out.append(s.substr(pos, hit - pos));
    out.append(to);
  }
  out.append(s.substr(pos));
  return out;
}

// "<0x41>" -> 0x41; -1 when the text is not of that form.
int byte_token_value(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int hi = hex(text[3]), lo = hex(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// The bytes a token stands for, control tokens included (as their text).
std::string piece_of(const Vocab& v, int32_t id) {
  const std::string& text = v.texts[id];
  switch (v.type(id)) {
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kUserDefined: return text;  // stored as plain text in both families
    case TokenType::kByte: {
      int b = byte_token_value(text);
      if (b >= 0) return std::string(1, static_cast<char>(b));
      break;
    }
    default: break;
  }
  return v.kind == TokenizerKind::kBytePairBpe ? byte_level::decode(text) : replace_all(text, kSpaceMarker, " ");
}

std::string model_name(const ggl::Metadata& md) {
  return md.has("tokenizer.ggml.model") ? md.get<std::string>("tokenizer.ggml.model") : std::string("none");
}

}  // namespace

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)), specials_(vocab_) {
  pieces_.reserve(vocab_.texts.size());
  for (int32_t id = 0; id < vocab_.size(); ++id) pieces_.push_back(piece_of(vocab_, id));
}

Tokenizer::~Tokenizer() = default;

bool Tokenizer::has_tokenizer(const ggl::Metadata& md) {
  std::string model = model_name(md);
  return model == "gpt2" || model == "llama";
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const ggl::GgufFile& file) { return from_metadata(file.metadata()); }

std::unique_ptr<Tokenizer> Tokenizer::from_metadata(const ggl::Metadata& md) {
  std::string model = model_name(md);
  if (model == "none" || model.empty())
    ggl::fail(
        "{}: the model has no tokenizer (tokenizer.ggml.model = none): text cannot be tokenized, "
        "only token ids can be given",
        md.source());
  if (model == "gpt2") {
    PreTokenizer pre(md.get_or<std::string>("tokenizer.ggml.pre", ""));
    bool add_bos_default = pre.preset() == "llama3" || pre.preset() == "tekken";
    Vocab vocab = load_vocab(md, TokenizerKind::kBytePairBpe, add_bos_default);
    auto merges = md.get<std::vector<std::string>>("tokenizer.ggml.merges");
    return std::unique_ptr<Tokenizer>(new BpeTokenizer(std::move(vocab), merges, std::move(pre)));
  }
  if (model == "llama")
    return std::unique_ptr<Tokenizer>(new SpmTokenizer(load_vocab(md, TokenizerKind::kSentencePiece, true)));
  ggl::fail("{}: tokenizer.ggml.model '{}' is not supported (supported: gpt2, llama)", md.source(), model);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> out;
  if (add_bos) {
    if (vocab_.bos < 0) ggl::fail("{}: cannot add BOS: the vocabulary has no BOS token", vocab_.source);
    out.push_back(vocab_.bos);
  }
  bool after_special = true;
  for (const TextFragment& f : specials_.partition(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else {
      encode_text(f.text, after_special, out);
      after_special = false;
    }
  }
  return out;
}

const std::string& Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  TokenType t = token_type(id);
  if (!render_special && (t == TokenType::kControl || t == TokenType::kUnknown)) return empty_;
  return pieces_[static_cast<size_t>(id)];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  token_type(id);  // range check
  return vocab_.texts[static_cast<size_t>(id)];
}

TokenType Tokenizer::token_type(int32_t id) const {
  if (id < 0 || id >= vocab_.size())
    ggl::fail("{}: token id {} is out of range (vocabulary of {})", vocab_.source, id, vocab_.size());
  return vocab_.type(id);
}

}  // namespace latte
