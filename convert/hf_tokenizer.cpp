#include "convert/hf_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "convert/text.h"

namespace latte::convert {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Token types as llama.cpp numbers them.
enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// Regex text with literal CR/LF spelled as the escapes \r \n, so patterns that tokenizer.json
// files write either way compare equal.
std::string normalize_regex(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '\r')
      out += "\\r";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

struct PreTokenizerShape {
  std::vector<std::string> splits;  // Split regexes in order (normalized)
  bool byte_level = false;          // a ByteLevel step is present
  bool byte_level_regex = false;    // ... and applies GPT-2's own split regex
};

void collect_pre_tokenizer(const json& p, PreTokenizerShape& shape, const std::string& source) {
  if (p.is_null()) return;
  if (!p.is_object() || !p.contains("type") || !p["type"].is_string())
    ggl::fail("{}: pre_tokenizer entry without a type", source);
  const std::string type = p["type"].get<std::string>();
  if (type == "Sequence") {
    if (!p.contains("pretokenizers") || !p["pretokenizers"].is_array())
      ggl::fail("{}: Sequence pre_tokenizer without a pretokenizers list", source);
    for (const json& q : p["pretokenizers"]) collect_pre_tokenizer(q, shape, source);
  } else if (type == "Split") {
    const json& pat = p.value("pattern", json::object());
    if (pat.contains("Regex") && pat["Regex"].is_string())
      shape.splits.push_back(normalize_regex(pat["Regex"].get<std::string>()));
    else if (pat.contains("String") && pat["String"].is_string())
      shape.splits.push_back("literal:" + pat["String"].get<std::string>());
    else
      ggl::fail("{}: Split pre_tokenizer without a pattern", source);
  } else if (type == "ByteLevel") {
    shape.byte_level = true;
    shape.byte_level_regex = shape.byte_level_regex || p.value("use_regex", true);
  } else if (type == "Digits") {
    shape.splits.push_back(p.value("individual_digits", false) ? "digits:individual" : "digits");
  } else {
    shape.splits.push_back("type:" + type);
  }
}

std::string describe_splits(const PreTokenizerShape& shape) {
  std::string s;
  for (const std::string& r : shape.splits) {
    std::string shown = r.size() > 40 ? r.substr(0, 40) + "..." : r;
    s += (s.empty() ? "" : ", ") + ("'" + shown + "'");
  }
  return s.empty() ? "none" : s;
}

// A token string from tokenizer_config.json: a plain string or an AddedToken object.
std::optional<std::string> token_content(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

bool is_byte_token(const std::string& t) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'); };
  return t.size() == 6 && t.starts_with("<0x") && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

ggl::Value string_array(const std::vector<std::string>& v) {
  ggl::Array a;
  a.element_type = ggl::ValueType::STRING;
  a.items.reserve(v.size());
  for (const std::string& s : v) a.items.push_back(ggl::Value{s});
  return ggl::Value{std::move(a)};
}

template <typename T>
ggl::Value scalar_array(ggl::ValueType type, const std::vector<T>& v) {
  ggl::Array a;
  a.element_type = type;
  a.items.reserve(v.size());
  for (T x : v) a.items.push_back(ggl::Value{x});
  return ggl::Value{std::move(a)};
}

// Everything read from tokenizer.json, indexed by id.
struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<bool> added;  // from added_tokens
  std::map<std::string, int64_t> ids;
};

// The chat template: tokenizer_config.json's "chat_template" (a string, or a list of named
// templates), else a chat_template.jinja / chat_template.json file next to it.
void add_chat_templates(const fs::path& root, const json* tok_config, ggl::Metadata& md) {
  if (tok_config && tok_config->contains("chat_template")) {
    const json& ct = (*tok_config)["chat_template"];
    if (ct.is_string()) {
      md.set("tokenizer.chat_template", ggl::Value{ct.get<std::string>()});
      return;
    }
    if (ct.is_array()) {
      for (const json& item : ct) {
        if (!item.is_object() || !item.contains("name") || !item.contains("template") || !item["name"].is_string() ||
            !item["template"].is_string())
          ggl::fail("{}: chat_template list entries need a name and a template",
                    (root / "tokenizer_config.json").string());
        const std::string name = item["name"].get<std::string>();
        md.set(name == "default" ? "tokenizer.chat_template" : "tokenizer.chat_template." + name,
               ggl::Value{item["template"].get<std::string>()});
      }
      return;
    }
    if (!ct.is_null())
      ggl::fail("{}: chat_template is neither a string nor a list", (root / "tokenizer_config.json").string());
  }
  if (fs::exists(root / "chat_template.jinja")) {
    std::ifstream in(root / "chat_template.jinja", std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    md.set("tokenizer.chat_template", ggl::Value{ss.str()});
  } else if (fs::exists(root / "chat_template.json")) {
    JsonObject ct = JsonObject::load((root / "chat_template.json").string());
    if (ct.has("chat_template")) md.set("tokenizer.chat_template", ggl::Value{ct.get_string("chat_template")});
  }
}

// add_bos/add_eos implied by a TemplateProcessing post-processor (possibly inside a Sequence):
// a special token before or after the sequence "A" in the single-sequence template.
void template_adds(const json& pp, std::optional<bool>& bos, std::optional<bool>& eos) {
  if (!pp.is_object()) return;
  if (pp.value("type", "") == "Sequence" && pp.contains("processors") && pp["processors"].is_array()) {
    for (const json& p : pp["processors"]) template_adds(p, bos, eos);
    return;
  }
  if (pp.value("type", "") != "TemplateProcessing" || !pp.contains("single") || !pp["single"].is_array()) return;
  const json& single = pp["single"];
  if (single.empty()) return;
  bos = single.front().contains("SpecialToken");
  eos = single.back().contains("SpecialToken");
}

}  // namespace

std::string identify_pre_tokenizer(const json& tj, const std::string& source) {
  PreTokenizerShape shape;
  collect_pre_tokenizer(tj.value("pre_tokenizer", json()), shape, source);
  const auto& s = shape.splits;
  if (s.empty() && shape.byte_level && shape.byte_level_regex) return "gpt-2";
  if (s.size() == 1 &&
      s[0].starts_with("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"))
    return "llama-bpe";
  if (s.size() == 6 && s[0] == "[\\r\\n]" && s[1].starts_with("\\s?[A-Za-zµÀ-ÖØ-öø-ƺ") &&
      s[2] == "\\s?[!-/:-~！-／：-～‘-‟　-。]+" && s[3] == "\\s+$" && s[4] == "[一-龥ࠀ-一가-퟿]+" &&
      s[5] == "\\p{N}+")
    return "deepseek-llm";
  if (s.size() == 5 && s[0] == "[\\r\\n]" && s[1] == "\\s?\\p{L}+" && s[2] == "\\s?\\p{P}+" &&
      s[3] == "[一-龥ࠀ-一가-퟿]+" && s[4] == "\\p{N}")
    return "deepseek-coder";
  if (s.size() == 3 && s[0] == "\\p{N}{1,3}" && s[1] == "[一-龥぀-ゟ゠-ヿ]+" &&
      contains(s[2], "[\\p{L}\\p{M}]+") && contains(s[2], " ?[\\p{P}\\p{S}]+"))
    return "deepseek-v3";
  ggl::fail(
      "{}: unrecognised byte-level pre-tokenizer (Split regexes: {}); known: gpt-2, llama-bpe, deepseek-llm, "
      "deepseek-coder, deepseek-v3; name it with --tokenizer-pre",
      source, describe_splits(shape));
}

std::string add_tokenizer_metadata(const std::string& dir, const JsonObject& config, int64_t n_vocab,
                                   const TokenizerOptions& opts, ggl::Metadata& md) {
  const fs::path root(dir);
  const fs::path tok_path = root / "tokenizer.json";
  if (!fs::exists(tok_path)) {
    if (fs::exists(root / "tokenizer.model"))
      ggl::fail("{}: has a SentencePiece tokenizer.model but no tokenizer.json; latte reads tokenizer.json", dir);
    return "";
  }
  const std::string src = tok_path.string();
  const json tj = read_json_file(src);
  if (!tj.is_object() || !tj.contains("model") || !tj["model"].is_object()) ggl::fail("{}: no \"model\" object", src);
  const json& model = tj["model"];
  const std::string model_type = model.value("type", "");
  if (model_type != "BPE")
    ggl::fail("{}: tokenizer model '{}' is not supported (byte-level BPE, or BPE with byte fallback)", src, model_type);
  if (!model.contains("vocab") || !model["vocab"].is_object()) ggl::fail("{}: BPE model without a vocab", src);
  const bool byte_fallback = model.value("byte_fallback", false);

  // Vocabulary by id: the BPE vocab, then added tokens (which may extend it).
  Vocabulary voc;
  int64_t max_id = -1;
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0)
      ggl::fail("{}: vocab entry '{}' has no valid id", src, it.key());
    max_id = std::max(max_id, it.value().get<int64_t>());
  }
  const json added = tj.value("added_tokens", json::array());
  if (!added.is_array()) ggl::fail("{}: added_tokens is not a list", src);
  for (const json& a : added) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || a["id"].get<int64_t>() < 0 ||
        !a.contains("content") || !a["content"].is_string())
      ggl::fail("{}: added_tokens entry without an id and content", src);
    max_id = std::max(max_id, a["id"].get<int64_t>());
  }
  if (max_id < 0) ggl::fail("{}: empty vocabulary", src);
  if (max_id >= n_vocab)
    ggl::fail("{}: token id {} does not fit the model's {} embedding rows (config.json vocab_size)", src, max_id,
              n_vocab);
  const size_t n = static_cast<size_t>(n_vocab);
  voc.tokens.assign(n, "");
  voc.types.assign(n, 0);
  voc.added.assign(n, false);
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    const size_t id = it.value().get<size_t>();
    if (voc.types[id] != 0) ggl::fail("{}: token id {} is used twice in the vocab", src, id);
    voc.tokens[id] = it.key();
    voc.types[id] = kNormal;
  }
  for (const json& a : added) {
    const size_t id = a["id"].get<size_t>();
    voc.tokens[id] = a["content"].get<std::string>();
    voc.types[id] = a.value("special", false) ? kControl : kUserDefined;
    voc.added[id] = true;
  }
  for (size_t id = 0; id < n; ++id) {
    if (voc.types[id] == 0) {
      // Ids the tokenizer does not use (embedding rows padded to a round number).
      voc.tokens[id] = fmt::format("[PAD{}]", id);
      voc.types[id] = kUnused;
    }
    voc.ids.emplace(voc.tokens[id], static_cast<int64_t>(id));
  }

  // Merges, as "left right" strings (newer tokenizer.json files write [left, right] pairs).
  std::vector<std::string> merges;
  if (model.contains("merges")) {
    if (!model["merges"].is_array()) ggl::fail("{}: merges is not a list", src);
    for (const json& m : model["merges"]) {
      if (m.is_string())
        merges.push_back(m.get<std::string>());
      else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
        merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      else
        ggl::fail("{}: merge entry {} is neither \"a b\" nor [a, b]", src, merges.size());
    }
  }

  // Special token ids: tokenizer_config.json names them; config.json has the ids as a fallback.
  const fs::path tc_path = root / "tokenizer_config.json";
  std::optional<json> tok_config;
  if (fs::exists(tc_path)) {
    tok_config = read_json_file(tc_path.string());
    if (!tok_config->is_object()) ggl::fail("{}: expected a JSON object", tc_path.string());
  }
  auto special_id = [&](const char* key, const char* config_key) -> std::optional<int64_t> {
    if (tok_config && tok_config->contains(key) && !(*tok_config)[key].is_null()) {
      std::optional<std::string> content = token_content((*tok_config)[key]);
      if (!content) ggl::fail("{}: {} is neither a string nor a token object", tc_path.string(), key);
      auto it = voc.ids.find(*content);
      if (it == voc.ids.end())
        ggl::fail("{}: {} '{}' is not in the vocabulary of tokenizer.json", tc_path.string(), key, *content);
      return it->second;
    }
    if (config_key && config.has(config_key) && config.raw()[config_key].is_number_integer()) {
      int64_t id = config.get_int(config_key);
      if (id < 0 || id >= n_vocab)
        ggl::fail("{}: {} {} is outside the vocabulary of {} tokens", config.source(), config_key, id, n_vocab);
      return id;
    }
    return std::nullopt;
  };
  std::optional<int64_t> bos = special_id("bos_token", "bos_token_id");
  std::optional<int64_t> eos = special_id("eos_token", "eos_token_id");
  std::optional<int64_t> pad = special_id("pad_token", nullptr);
  std::optional<int64_t> unk;
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto it = voc.ids.find(model["unk_token"].get<std::string>());
    if (it != voc.ids.end()) unk = it->second;
  }
  if (!unk) unk = special_id("unk_token", nullptr);
  std::optional<bool> add_bos, add_eos;
  template_adds(tj.value("post_processor", json()), add_bos, add_eos);
  if (tok_config) {
    if (tok_config->contains("add_bos_token") && (*tok_config)["add_bos_token"].is_boolean())
      add_bos = (*tok_config)["add_bos_token"].get<bool>();
    if (tok_config->contains("add_eos_token") && (*tok_config)["add_eos_token"].is_boolean())
      add_eos = (*tok_config)["add_eos_token"].get<bool>();
  }

  std::string description;
  if (byte_fallback) {
    // SentencePiece-style: engines merge the adjacent pair whose joined text is the token with
    // the highest score. Hugging Face's export of a SentencePiece BPE lists the merges in the
    // order of the tokens they produce, and those tokens in the original score order, so the
    // score of the k-th ordinary token is -k. If the merges disagree with the id order, the
    // scores follow the merge ranks instead.
    if (unk) voc.types[*unk] = kUnknown;
    for (size_t id = 0; id < n; ++id)
      if (!voc.added[id] && voc.types[id] == kNormal && is_byte_token(voc.tokens[id])) voc.types[id] = kByte;
    std::vector<int64_t> merge_result;  // token id produced by each merge, in rank order
    bool merges_follow_ids = true;
    for (const std::string& m : merges) {
      const size_t sp = m.find(' ');
      auto it = sp == std::string::npos ? voc.ids.end() : voc.ids.find(m.substr(0, sp) + m.substr(sp + 1));
      if (it == voc.ids.end()) ggl::fail("{}: merge '{}' produces a token that is not in the vocab", src, m);
      if (!merge_result.empty() && it->second < merge_result.back()) merges_follow_ids = false;
      merge_result.push_back(it->second);
    }
    std::vector<float> scores(n, 0.0f);
    if (merges_follow_ids) {
      int64_t rank = 0;
      for (size_t id = 0; id < n; ++id)
        if (voc.types[id] == kNormal) scores[id] = -static_cast<float>(rank++);
    } else {
      std::vector<bool> set(n, false);
      for (size_t r = 0; r < merge_result.size(); ++r)
        if (!set[merge_result[r]]) scores[merge_result[r]] = -static_cast<float>(r), set[merge_result[r]] = true;
      int64_t rank = static_cast<int64_t>(merge_result.size());
      for (size_t id = 0; id < n; ++id)
        if (voc.types[id] == kNormal && !set[id]) scores[id] = -static_cast<float>(rank++);
    }
    md.set("tokenizer.ggml.model", ggl::Value{std::string("llama")});
    md.set("tokenizer.ggml.tokens", string_array(voc.tokens));
    md.set("tokenizer.ggml.scores", scalar_array(ggl::ValueType::F32, scores));
    md.set("tokenizer.ggml.token_type", scalar_array(ggl::ValueType::I32, voc.types));
    description = fmt::format("llama (BPE with byte fallback), {} tokens", n);
  } else {
    PreTokenizerShape shape;
    collect_pre_tokenizer(tj.value("pre_tokenizer", json()), shape, src);
    const bool decoder_byte_level =
        tj.contains("decoder") && tj["decoder"].is_object() && tj["decoder"].value("type", "") == "ByteLevel";
    if (!shape.byte_level && !decoder_byte_level)
      ggl::fail("{}: BPE without a ByteLevel pre-tokenizer or byte fallback is not supported", src);
    const std::string pre = opts.pre ? *opts.pre : identify_pre_tokenizer(tj, src);
    md.set("tokenizer.ggml.model", ggl::Value{std::string("gpt2")});
    md.set("tokenizer.ggml.pre", ggl::Value{pre});
    md.set("tokenizer.ggml.tokens", string_array(voc.tokens));
    md.set("tokenizer.ggml.token_type", scalar_array(ggl::ValueType::I32, voc.types));
    md.set("tokenizer.ggml.merges", string_array(merges));
    description = fmt::format("gpt2 (byte-level BPE, pre-tokenizer {}), {} tokens, {} merges", pre, n, merges.size());
  }
  if (bos) md.set("tokenizer.ggml.bos_token_id", ggl::Value{static_cast<uint32_t>(*bos)});
  if (eos) md.set("tokenizer.ggml.eos_token_id", ggl::Value{static_cast<uint32_t>(*eos)});
  if (unk) md.set("tokenizer.ggml.unknown_token_id", ggl::Value{static_cast<uint32_t>(*unk)});
  if (pad) md.set("tokenizer.ggml.padding_token_id", ggl::Value{static_cast<uint32_t>(*pad)});
  if (add_bos) md.set("tokenizer.ggml.add_bos_token", ggl::Value{*add_bos});
  if (add_eos) md.set("tokenizer.ggml.add_eos_token", ggl::Value{*add_eos});
  if (byte_fallback) {
    // SentencePiece prefixes text with "▁" unless the normalizer / pre-tokenizer says otherwise.
    const std::string norm = tj.value("normalizer", json()).dump();
    const std::string pre = tj.value("pre_tokenizer", json()).dump();
    const bool prefix = contains(norm, "\"Prepend\"") ||
                        (contains(pre, "\"Metaspace\"") && !contains(pre, "\"prepend_scheme\":\"never\"") &&
                         !contains(pre, "\"add_prefix_space\":false"));
    if (!prefix) md.set("tokenizer.ggml.add_space_prefix", ggl::Value{false});
  }
  add_chat_templates(root, tok_config ? &*tok_config : nullptr, md);
  return description;
}

}  // namespace latte::convert
