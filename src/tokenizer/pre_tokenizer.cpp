#include "src/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <set>

#include "ggml-like/core/error.h"
#include "src/tokenizer/utf8.h"

namespace latte {

// One compiled PCRE2 expression (UTF + UCP, JIT-compiled when the platform allows).
// Immutable after construction, so it is shared between threads; match data is per call.
class Pcre2Regex {
 public:
  explicit Pcre2Regex(const std::string& pattern) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                          &error_offset, nullptr);
    if (!code_) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      ggl::fail("pre-tokenizer regex does not compile at offset {}: {}", error_offset,
                reinterpret_cast<const char*>(message));
    }
    // Without JIT support PCRE2 interprets the pattern: slower, same result.
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
  }
  ~Pcre2Regex() { pcre2_code_free(code_); }
  Pcre2Regex(const Pcre2Regex&) = delete;
  Pcre2Regex& operator=(const Pcre2Regex&) = delete;

  // Appends to `out` the words of `word` under this expression: matches and the gaps between them.
  void refine(std::string_view word, pcre2_match_data* md, std::vector<std::string_view>& out) const {
    auto subject = reinterpret_cast<PCRE2_SPTR>(word.data());
    size_t offset = 0, done = 0;
    while (offset < word.size()) {
      // The text was checked for valid UTF-8 before splitting: skip PCRE2's own check.
      int rc = pcre2_match(code_, subject, word.size(), offset, PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // deep backtracking on a huge word: the interpreter copes
        rc = pcre2_match(code_, subject, word.size(), offset, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof(message));
        ggl::fail("pre-tokenizer regex failed: {}", reinterpret_cast<const char*>(message));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      size_t begin = ov[0], end = ov[1];
      if (end == begin) {  // an empty match splits nothing: step over one character
        int n = utf8::sequence_length(static_cast<uint8_t>(word[begin]));
        offset = begin + (n > 0 ? n : 1);
        continue;
      }
      if (begin > done) out.push_back(word.substr(done, begin - done));
      out.push_back(word.substr(begin, end - begin));
      done = offset = end;
    }
    if (done < word.size()) out.push_back(word.substr(done));
  }

  pcre2_code* code() const { return code_; }

 private:
  pcre2_code* code_ = nullptr;
};

namespace {

// --- Expressions (PCRE syntax), from the pre_tokenizer definitions of the models' tokenizer.json. ---

// GPT-2: contractions, letters, numbers, other symbols (each optionally after one space), spaces.
constexpr const char* kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";

// Llama 3 (tiktoken cl100k style): case-insensitive contractions, numbers in groups of up to 3,
// newlines kept with the punctuation before them. (?i:...) is spelled out so that only ASCII
// letters match, as in the reference implementations.
#define LATTE_CONTRACTIONS R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))re"
constexpr const char* kLlama3 =
    LATTE_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Qwen2 / StableLM2: as Llama 3 but one digit per word.
constexpr const char* kQwen2 =
    LATTE_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// GPT-4o / Llama 4: upper/lower-case aware words with an optional contraction suffix.
constexpr const char* kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)re" LATTE_CONTRACTIONS
    R"re(?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)re" LATTE_CONTRACTIONS
    R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
#undef LATTE_CONTRACTIONS
// Mistral Tekken.
constexpr const char* kTekken = R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)re"
                                R"re(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)re"
                                R"re(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// BLOOM / Poro: everything up to whitespace or sentence punctuation.
constexpr const char* kBloom = R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)re";

// DeepSeek LLM (V2, V2-Lite, V2.5): newlines alone; cased letters (the explicit class below is
// the set of upper/lower/title-case letters the model's tokenizer lists); ASCII, full-width
// and CJK punctuation; trailing whitespace; CJK ideographs and Hangul; numbers.
constexpr const char* kDeepSeekLetters =
    R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})re"
    R"re(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1})re"
    R"re(\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5})re"
    R"re(\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A})re"
    R"re(\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})re"
    R"re(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})re"
    R"re(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})re"
    R"re(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134})re"
    R"re(\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})re"
    R"re(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787})re"
    R"re(\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A})re"
    R"re(\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})re"
    R"re(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re";
constexpr const char* kDeepSeekPunct =
    R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re";
constexpr const char* kDeepSeekCjk = R"re([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";

// DeepSeek V3 / R1: numbers in groups of up to 3, CJK and kana runs, then a GPT-4-like split.
constexpr const char* kDeepSeek3Cjk = R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re";
constexpr const char* kDeepSeek3Main =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)re"
    R"re(| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

struct Preset {
  const char* id;
  std::vector<const char*> names;  // `tokenizer.ggml.pre` values that select it
  std::vector<const char*> patterns;
  bool ignore_merges = false;
};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> kPresets = {
      // The fallback: GPT-2 words, with punctuation runs and 3-digit groups split off first.
      {"default", {"default"}, {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", R"re([0-9][0-9][0-9])re"}},
      {"gpt-2",
       {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es", "jina-v2-de", "jina-v2-code",
        "roberta-bpe", "mpt", "olmo", "jais", "exaone4", "trillion", "a.x-4.0", "mellum", "granite-docling"},
       {kGpt2}},
      {"llama3",
       {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {kLlama3},
       true},
      {"dbrx", {"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}, {kLlama3}},
      {"deepseek-llm",
       {"deepseek-llm"},
       {R"re([\r\n])re", kDeepSeekLetters, kDeepSeekPunct, R"re(\s+\z)re", kDeepSeekCjk, R"re(\p{N}+)re"}},
      {"deepseek-coder",
       {"deepseek-coder"},
       {R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kDeepSeekCjk, R"re(\p{N})re"}},
      {"deepseek-v3", {"deepseek-v3", "hunyuan-dense"}, {R"re(\p{N}{1,3})re", kDeepSeek3Cjk, kDeepSeek3Main}},
      {"qwen2", {"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan", "kormo"}, {kQwen2}},
      {"falcon", {"falcon"}, {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, R"re([0-9][0-9][0-9])re"}},
      {"starcoder",
       {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {R"re(\p{N})re", kGpt2}},
      {"bloom", {"bloom", "poro-chat", "gpt3-finnish"}, {kBloom}},
      {"viking", {"viking"}, {kBloom, R"re(\p{N})re"}},
      {"tekken", {"tekken"}, {kTekken}, true},
      {"gpt-4o", {"gpt-4o", "llama4", "minimax-m2"}, {kGpt4o}},
  };
  return kPresets;
}

const Preset* find_preset(std::string_view name) {
  for (const Preset& p : presets())
    for (const char* n : p.names)
      if (name == n) return &p;
  return nullptr;
}

void warn_unknown_once(std::string_view name) {
  static std::mutex mutex;
  static std::set<std::string, std::less<>> warned;
  std::lock_guard<std::mutex> lock(mutex);
  if (!warned.emplace(name).second) return;
  std::fprintf(stderr, "latte: warning: unknown pre-tokenizer '%.*s' (tokenizer.ggml.pre), using 'default'\n",
               static_cast<int>(name.size()), name.data());
}

// Compiled expressions are shared by every tokenizer of the process.
std::shared_ptr<const Pcre2Regex> compiled(const char* pattern) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const Pcre2Regex>, std::less<>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(std::string_view(pattern));
  if (it != cache.end()) return it->second;
  auto regex = std::make_shared<const Pcre2Regex>(pattern);
  cache.emplace(pattern, regex);
  return regex;
}

}  // namespace

PreTokenizer::PreTokenizer(std::string_view name) {
  const Preset* preset = find_preset(name);
  if (!preset) {
    if (!name.empty()) warn_unknown_once(name);
    preset = find_preset("default");
  }
  preset_ = preset->id;
  ignore_merges_ = preset->ignore_merges;
  for (const char* pattern : preset->patterns) regexes_.push_back(compiled(pattern));
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

std::vector<std::string> PreTokenizer::known_names() {
  std::vector<std::string> names;
  for (const Preset& p : presets())
    for (const char* n : p.names) names.emplace_back(n);
  return names;
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  // Cut the text into runs of valid UTF-8; each invalid byte is a word of its own.
  std::vector<std::string_view> words;
  size_t run = 0, i = 0;
  while (i < text.size()) {
    int n = utf8::valid_char_length(text.substr(i));
    if (n > 0) {
      i += n;
      continue;
    }
    if (i > run) words.push_back(text.substr(run, i - run));
    words.push_back(text.substr(i, 1));
    run = ++i;
  }
  if (i > run) words.push_back(text.substr(run, i - run));
  if (regexes_.empty()) return words;

  std::vector<std::string_view> refined;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(nullptr, &pcre2_match_data_free);
  for (const auto& regex : regexes_) {
    md.reset(pcre2_match_data_create_from_pattern(regex->code(), nullptr));
    if (!md) throw std::bad_alloc();
    refined.clear();
    refined.reserve(words.size() * 2);
    for (std::string_view w : words) {
      bool invalid_byte = w.size() == 1 && utf8::valid_char_length(w) == 0;
      if (invalid_byte)
        refined.push_back(w);
      else
        regex->refine(w, md.get(), refined);
    }
    words.swap(refined);
  }
  return words;
}

}  // namespace latte
