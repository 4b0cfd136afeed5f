#include "src/tokenizer/spm_tokenizer.h"

#include <fmt/format.h>

#include <queue>

#include "src/tokenizer/utf8.h"

namespace latte {

SpmTokenizer::SpmTokenizer(Vocab vocab) : Tokenizer(std::move(vocab)) {
  for (int b = 0; b < 256; ++b) {
    int32_t id = this->vocab().find(fmt::format("<0x{:02X}>", b));
    if (id < 0) id = this->vocab().find(std::string(1, static_cast<char>(b)));
    byte_tokens_[b] = id;
  }
}

std::string SpmTokenizer::describe() const {
  return fmt::format("SentencePiece BPE, {} tokens, {}", n_vocab(),
                     add_space_prefix() ? "space prefix" : "no space prefix");
}

int32_t SpmTokenizer::mergeable_token(std::string_view text) const {
  int32_t id = vocab().find(text);
  if (id < 0) return -1;
  TokenType t = vocab().type(id);
  return t == TokenType::kNormal || t == TokenType::kUserDefined || t == TokenType::kUndefined ? id : -1;
}

void SpmTokenizer::encode_text(std::string_view raw, bool after_special, std::vector<int32_t>& out) const {
  std::string text;
  text.reserve(raw.size() + 8);
  if (add_space_prefix() && after_special) text += "\xE2\x96\x81";
  for (char c : raw) {
    if (c == ' ')
      text += "\xE2\x96\x81";
    else
      text += c;
  }

  struct Symbol {
    size_t begin, len;
    int prev, next;
  };
  std::vector<Symbol> symbols;
  for (size_t i = 0; i < text.size();) {
    int n = utf8::sequence_length(static_cast<uint8_t>(text[i]));
    size_t len = std::min(text.size() - i, static_cast<size_t>(n > 0 ? n : 1));
    int idx = static_cast<int>(symbols.size());
    symbols.push_back({i, len, idx - 1, i + len < text.size() ? idx + 1 : -1});
    i += len;
  }
  if (symbols.empty()) return;

  struct Pair {
    float score;
    int left, right;
    size_t len;  // length of the merged text, to detect pairs made stale by other merges
  };
  auto later = [](const Pair& a, const Pair& b) { return a.score != b.score ? a.score < b.score : a.left > b.left; };
  std::priority_queue<Pair, std::vector<Pair>, decltype(later)> queue(later);
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    size_t len = symbols[left].len + symbols[right].len;
    int32_t id = mergeable_token(std::string_view(text).substr(symbols[left].begin, len));
    if (id >= 0) queue.push({vocab().scores[id], left, right, len});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) consider(i - 1, i);

  while (!queue.empty()) {
    Pair p = queue.top();
    queue.pop();
    Symbol& l = symbols[p.left];
    Symbol& r = symbols[p.right];
    if (l.len == 0 || r.len == 0 || l.next != p.right || l.len + r.len != p.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = p.left;
    consider(l.prev, p.left);
    consider(p.left, l.next);
  }

  for (int i = 0; i >= 0; i = symbols[i].next) {
    std::string_view symbol = std::string_view(text).substr(symbols[i].begin, symbols[i].len);
    // Merged symbols are tokens by construction; single characters may not be.
    int32_t id = mergeable_token(symbol);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Byte fallback; a vocabulary without byte tokens gets one <unk> for the character instead.
    bool have_bytes = true;
    for (char c : symbol) have_bytes = have_bytes && byte_tokens_[static_cast<uint8_t>(c)] >= 0;
    if (have_bytes) {
      for (char c : symbol) out.push_back(byte_tokens_[static_cast<uint8_t>(c)]);
    } else if (vocab().unk >= 0) {
      out.push_back(vocab().unk);
    } else {
      ggl::fail("{}: cannot encode byte 0x{:02X}: the vocabulary has neither byte tokens nor an unknown token",
                source(), static_cast<uint8_t>(symbol[0]));
    }
  }
}

}  // namespace latte
