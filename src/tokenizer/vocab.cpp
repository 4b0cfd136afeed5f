#include "src/tokenizer/vocab.h"

#include <algorithm>
#include <cstdio>

namespace latte {

int32_t Vocab::find(std::string_view text) const {
  auto it = ids_.find(text);
  return it == ids_.end() ? -1 : it->second;
}

bool Vocab::is_eog(int32_t id) const { return std::binary_search(eog.begin(), eog.end(), id); }

void Vocab::index_texts() {
  ids_.clear();
  ids_.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) ids_[texts[i]] = static_cast<int32_t>(i);
}

namespace {

// Texts that mark the end of a turn in common chat vocabularies; such tokens end generation
// even when the metadata names no EOT id (the GGUF converters do not always write one).
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>",         "<end_of_turn>",      "<|endoftext|>",         "<|eom_id|>",
    "<EOT>",      "_<EOT>",     "<|end_of_text|>", "<end_of_utterance>", "<｜end▁of▁sentence｜>",
};

// Reads an optional token id key; ids outside the vocabulary (e.g. 0xFFFFFFFF written for "none")
// leave `id` unchanged, with a warning unless the value is that conventional "none".
void read_id(const ggl::Metadata& md, std::string_view key, int32_t n_vocab, int32_t& id) {
  if (!md.has(key)) return;
  int64_t v = md.get<int64_t>(key);
  if (v >= 0 && v < n_vocab) {
    id = static_cast<int32_t>(v);
    return;
  }
  if (v != 0xFFFFFFFFLL && v != -1)
    std::fprintf(stderr, "latte: warning: %s: %.*s = %lld is not a token id (vocabulary of %d), ignored\n",
                 md.source().c_str(), static_cast<int>(key.size()), key.data(), static_cast<long long>(v), n_vocab);
}

TokenType to_token_type(int32_t v) { return v >= 0 && v <= 6 ? static_cast<TokenType>(v) : TokenType::kUndefined; }

}  // namespace

Vocab load_vocab(const ggl::Metadata& md, TokenizerKind kind, bool add_bos_default) {
  Vocab v;
  v.source = md.source();
  v.kind = kind;
  v.pre = md.get_or<std::string>("tokenizer.ggml.pre", "");
  v.texts = md.get<std::vector<std::string>>("tokenizer.ggml.tokens");
  const int32_t n = v.size();
  if (n == 0) ggl::fail("{}: tokenizer.ggml.tokens is empty", v.source);

  if (md.has("tokenizer.ggml.scores")) {
    v.scores = md.get<std::vector<float>>("tokenizer.ggml.scores");
    if (v.scores.size() != v.texts.size())
      ggl::fail("{}: tokenizer.ggml.scores has {} entries for {} tokens", v.source, v.scores.size(), n);
  } else {
    v.scores.assign(v.texts.size(), 0.0f);
  }
  if (md.has("tokenizer.ggml.token_type")) {
    auto raw = md.get<std::vector<int32_t>>("tokenizer.ggml.token_type");
    if (raw.size() != v.texts.size())
      ggl::fail("{}: tokenizer.ggml.token_type has {} entries for {} tokens", v.source, raw.size(), n);
    v.types.reserve(raw.size());
    for (int32_t t : raw) v.types.push_back(to_token_type(t));
  } else {
    v.types.assign(v.texts.size(), TokenType::kNormal);
  }
  v.index_texts();

  if (kind == TokenizerKind::kSentencePiece) {
    auto default_id = [&](int32_t id) { return id < n ? id : -1; };
    v.bos = default_id(1);
    v.eos = default_id(2);
    v.unk = default_id(0);
    v.add_bos = true;
    v.add_space_prefix = true;
  } else {
    v.add_bos = add_bos_default;
  }
  read_id(md, "tokenizer.ggml.bos_token_id", n, v.bos);
  read_id(md, "tokenizer.ggml.eos_token_id", n, v.eos);
  read_id(md, "tokenizer.ggml.eot_token_id", n, v.eot);
  read_id(md, "tokenizer.ggml.eom_token_id", n, v.eom);
  read_id(md, "tokenizer.ggml.unknown_token_id", n, v.unk);
  v.add_bos = md.get_or<bool>("tokenizer.ggml.add_bos_token", v.add_bos);
  v.add_eos = md.get_or<bool>("tokenizer.ggml.add_eos_token", v.add_eos);
  v.add_space_prefix = md.get_or<bool>("tokenizer.ggml.add_space_prefix", v.add_space_prefix);

  for (int32_t id : {v.eos, v.eot, v.eom})
    if (id >= 0) v.eog.push_back(id);
  for (std::string_view text : kEndOfGenerationTexts) {
    int32_t id = v.find(text);
    if (id < 0) continue;
    v.eog.push_back(id);
    v.types[id] = TokenType::kControl;  // an end marker must never come out of plain text
  }
  std::sort(v.eog.begin(), v.eog.end());
  v.eog.erase(std::unique(v.eog.begin(), v.eog.end()), v.eog.end());
  return v;
}

}  // namespace latte
