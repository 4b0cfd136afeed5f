#include "src/tokenizer/bpe_tokenizer.h"

#include <fmt/format.h>

#include <queue>

#include "src/tokenizer/byte_level.h"
#include "src/tokenizer/utf8.h"

namespace latte {

BpeTokenizer::BpeTokenizer(Vocab vocab, const std::vector<std::string>& merges, PreTokenizer pre)
    : Tokenizer(std::move(vocab)), pre_(std::move(pre)) {
  ranks_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    // The separator is the first space after the first character (a rule's left part is never empty).
    if (merges[i].find(' ', 1) == std::string::npos)
      ggl::fail("{}: tokenizer.ggml.merges[{}] = '{}' is not of the form 'left right'", source(), i, merges[i]);
    ranks_.try_emplace(merges[i], static_cast<int32_t>(i));  // a repeated rule keeps its first rank
  }
}

std::string BpeTokenizer::describe() const {
  return fmt::format("byte-level BPE, {} tokens, {} merges, pre-tokenizer {}{}", n_vocab(), ranks_.size(),
                     pre_.preset(),
                     vocab().pre.empty() || vocab().pre == pre_.preset() ? "" : " (for '" + vocab().pre + "')");
}

int32_t BpeTokenizer::symbol_token(std::string_view symbol) const {
  int32_t id = vocab().find(symbol);
  if (id < 0) return -1;
  TokenType t = vocab().type(id);
  return t == TokenType::kControl || t == TokenType::kUnknown ? -1 : id;
}

void BpeTokenizer::encode_text(std::string_view text, bool, std::vector<int32_t>& out) const {
  for (std::string_view word : pre_.split(text)) encode_word(byte_level::encode(word), out);
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (pre_.ignore_merges()) {
    int32_t whole = symbol_token(word);
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }

  // Symbols form a linked list over the word; merging grows the left symbol and empties the right.
  struct Symbol {
    size_t begin, len;
    int prev, next;
  };
  std::vector<Symbol> symbols;
  for (size_t i = 0; i < word.size();) {
    int n = utf8::sequence_length(static_cast<uint8_t>(word[i]));  // byte-level text is valid UTF-8
    size_t len = std::min(word.size() - i, static_cast<size_t>(n > 0 ? n : 1));
    int idx = static_cast<int>(symbols.size());
    symbols.push_back({i, len, idx - 1, i + len < word.size() ? idx + 1 : -1});
    i += len;
  }

  struct Pair {
    int32_t rank;
    int left, right;
    size_t left_len, right_len;  // to detect pairs made stale by other merges
  };
  auto later = [](const Pair& a, const Pair& b) { return a.rank != b.rank ? a.rank > b.rank : a.left > b.left; };
  std::priority_queue<Pair, std::vector<Pair>, decltype(later)> queue(later);
  std::string key;
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    key.assign(word.substr(l.begin, l.len));
    key += ' ';
    key.append(word.substr(r.begin, r.len));
    auto it = ranks_.find(key);
    if (it != ranks_.end()) queue.push({it->second, left, right, l.len, r.len});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) consider(i - 1, i);

  while (!queue.empty()) {
    Pair p = queue.top();
    queue.pop();
    Symbol& l = symbols[p.left];
    Symbol& r = symbols[p.right];
    if (l.len != p.left_len || r.len != p.right_len || l.next != p.right) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = p.left;
    consider(l.prev, p.left);
    consider(p.left, l.next);
  }

  for (int i = 0; i >= 0; i = symbols[i].next) {
    std::string_view symbol = word.substr(symbols[i].begin, symbols[i].len);
    int32_t id = symbol_token(symbol);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // A symbol without a token (only in incomplete vocabularies): one token per character, the
    // unknown token where even that is missing.
    for (size_t j = 0; j < symbol.size();) {
      int n = utf8::sequence_length(static_cast<uint8_t>(symbol[j]));
      size_t len = std::min(symbol.size() - j, static_cast<size_t>(n > 0 ? n : 1));
      int32_t c = symbol_token(symbol.substr(j, len));
      if (c >= 0)
        out.push_back(c);
      else if (vocab().unk >= 0)
        out.push_back(vocab().unk);
      j += len;
    }
  }
}

}  // namespace latte
