// Pre-tokenization for byte-level BPE: the text is cut into words by a sequence of regular
// expressions (chosen by the GGUF key `tokenizer.ggml.pre`), and BPE merges never cross a word.
// Each expression refines the current words: inside each word, every match becomes a word and so
// does every stretch between matches (the "Isolated" split of Hugging Face tokenizers).
// Matching uses PCRE2 in UTF + UCP mode, so \p{L}, \p{N}, \s ... follow the Unicode tables.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace latte {

class Pcre2Regex;

class PreTokenizer {
 public:
  // The pre-tokenizer for a `tokenizer.ggml.pre` value. An empty or unknown name gives the default
  // one; an unknown name is reported once per process on stderr.
  explicit PreTokenizer(std::string_view name);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Words of `text`, in order; their concatenation is `text`. Bytes that are not valid UTF-8
  // become one-byte words of their own (regular expressions only see valid UTF-8).
  std::vector<std::string_view> split(std::string_view text) const;

  // The preset actually used ("default" for unknown names).
  const std::string& preset() const { return preset_; }
  // BPE option tied to the preset (llama3, tekken): a word that is itself a token is taken whole.
  bool ignore_merges() const { return ignore_merges_; }

  // Every `tokenizer.ggml.pre` value recognised, for documentation and --help.
  static std::vector<std::string> known_names();

 private:
  std::string preset_;
  bool ignore_merges_ = false;
  std::vector<std::shared_ptr<const Pcre2Regex>> regexes_;
};

}  // namespace latte
