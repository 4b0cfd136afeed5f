#include "src/chat/chat_template.h"

#include <iterator>

#include "ggml-like/core/error.h"

namespace latte {
namespace {

// One element of a template's markup: text, a named special token, or the tokenizer's BOS/EOS.
struct Mark {
  enum Kind { kText, kSpecial, kBos, kEos } kind;
  std::string_view text = {};
};
constexpr Mark T(std::string_view s) { return {Mark::kText, s}; }
constexpr Mark S(std::string_view s) { return {Mark::kSpecial, s}; }
constexpr Mark kBos{Mark::kBos};
constexpr Mark kEos{Mark::kEos};
using Marks = std::vector<Mark>;

enum class BosRule { kNever, kAlways, kIfTokenizerAdds };

}  // namespace

struct ChatTemplate::Spec {
  std::string_view name, description;
  std::vector<std::string_view> markers;  // substrings that identify the template's Jinja text (all of them)
  BosRule bos;                            // at the start of the conversation
  Marks system_prefix, system_suffix;
  bool system_opens_user;  // the system prompt is written inside the first user turn (Llama-2)
  Marks user_prefix, user_suffix;
  Marks assistant_prefix, assistant_suffix;  // around a reply in the history; the suffix also closes a fresh reply
  Marks generation_prompt;
  bool starts_thinking;
};

namespace {

// The table. Strings are what each model family's own template (and llama.cpp) writes; DeepSeek's
// special tokens use U+FF5C (｜) and U+2581 (▁). Checked by the golden tests in tests/src/chat/test_chat_template.cpp.
// Detection goes down the table and takes the first row whose markers all occur.
const ChatTemplate::Spec kSpecs[] = {
    {"deepseek-r1",
     "DeepSeek-R1: <｜User｜>…<｜Assistant｜><think>\\n (reply opens with reasoning)",
     {"<｜Assistant｜><think>"},
     BosRule::kAlways,
     {},
     {},
     false,
     {S("<｜User｜>")},
     {},
     {S("<｜Assistant｜>")},
     {kEos},
     {S("<｜Assistant｜>"), T("<think>\n")},
     true},
    {"deepseek3",
     "DeepSeek-V3 / V2.5: <｜User｜>…<｜Assistant｜>…<｜end▁of▁sentence｜>",
     {"<｜User｜>", "<｜Assistant｜>"},
     BosRule::kAlways,
     {},
     {},
     false,
     {S("<｜User｜>")},
     {},
     {S("<｜Assistant｜>")},
     {kEos},
     {S("<｜Assistant｜>")},
     false},
    {"deepseek2",
     "DeepSeek-V2: User: …\\n\\nAssistant: …<｜end▁of▁sentence｜>",
     {"'Assistant: '"},
     BosRule::kAlways,
     {},
     {T("\n\n")},
     false,
     {T("User: ")},
     {T("\n\n")},
     {T("Assistant: ")},
     {kEos},
     {T("Assistant:")},
     false},
    {"llama3",
     "Llama 3: <|start_header_id|>role<|end_header_id|>\\n\\n…<|eot_id|>",
     {"<|start_header_id|>"},
     BosRule::kAlways,
     {S("<|start_header_id|>"), T("system"), S("<|end_header_id|>"), T("\n\n")},
     {S("<|eot_id|>")},
     false,
     {S("<|start_header_id|>"), T("user"), S("<|end_header_id|>"), T("\n\n")},
     {S("<|eot_id|>")},
     {S("<|start_header_id|>"), T("assistant"), S("<|end_header_id|>"), T("\n\n")},
     {S("<|eot_id|>")},
     {S("<|start_header_id|>"), T("assistant"), S("<|end_header_id|>"), T("\n\n")},
     false},
    {"chatml",
     "ChatML (Qwen, ...): <|im_start|>role\\n…<|im_end|>\\n",
     {"<|im_start|>"},
     BosRule::kNever,
     {S("<|im_start|>"), T("system\n")},
     {S("<|im_end|>"), T("\n")},
     false,
     {S("<|im_start|>"), T("user\n")},
     {S("<|im_end|>"), T("\n")},
     {S("<|im_start|>"), T("assistant\n")},
     {S("<|im_end|>"), T("\n")},
     {S("<|im_start|>"), T("assistant\n")},
     false},
    {"llama2",
     "Llama 2: <s>[INST] <<SYS>>\\n…\\n<</SYS>>\\n\\n… [/INST]…</s>",
     {"[INST]"},
     BosRule::kNever,
     {T("<<SYS>>\n")},
     {T("\n<</SYS>>\n\n")},
     true,
     {kBos, T("[INST] ")},
     {T(" [/INST]")},
     {},
     {kEos},
     {},
     false},
    {"plain",
     "no template: the conversation is one continued text (story models)",
     {},
     BosRule::kIfTokenizerAdds,
     {},
     {},
     false,
     {},
     {},
     {},
     {},
     {},
     false},
};

const ChatTemplate kTemplates[] = {ChatTemplate(&kSpecs[0]), ChatTemplate(&kSpecs[1]), ChatTemplate(&kSpecs[2]),
                                   ChatTemplate(&kSpecs[3]), ChatTemplate(&kSpecs[4]), ChatTemplate(&kSpecs[5]),
                                   ChatTemplate(&kSpecs[6])};
static_assert(std::size(kTemplates) == std::size(kSpecs));

void append(std::vector<ChatPiece>& out, Marks marks, const SpecialTexts& sp) {
  for (const Mark& m : marks) {
    switch (m.kind) {
      case Mark::kText: out.push_back({std::string(m.text), false}); break;
      case Mark::kSpecial: out.push_back({std::string(m.text), true}); break;
      case Mark::kBos:
        if (!sp.bos.empty()) out.push_back({sp.bos, true});
        break;
      case Mark::kEos:
        if (!sp.eos.empty()) out.push_back({sp.eos, true});
        break;
    }
  }
}

void append_text(std::vector<ChatPiece>& out, const std::string& text) {
  if (!text.empty()) out.push_back({text, false});
}

}  // namespace

std::string_view role_name(Role r) {
  switch (r) {
    case Role::kSystem: return "system";
    case Role::kUser: return "user";
    case Role::kAssistant: return "assistant";
  }
  return "?";
}

std::optional<Role> parse_role(std::string_view s) {
  for (Role r : {Role::kSystem, Role::kUser, Role::kAssistant})
    if (s == role_name(r)) return r;
  return std::nullopt;
}

std::string to_text(std::span<const ChatPiece> pieces) {
  std::string s;
  for (const ChatPiece& p : pieces) s += p.text;
  return s;
}

std::span<const ChatTemplate> ChatTemplate::all() { return kTemplates; }

const ChatTemplate& ChatTemplate::plain() { return kTemplates[std::size(kTemplates) - 1]; }

const ChatTemplate& ChatTemplate::by_name(std::string_view name) {
  std::string names;
  for (const ChatTemplate& t : kTemplates) {
    if (t.name() == name) return t;
    names += names.empty() ? "" : ", ";
    names += t.name();
  }
  ggl::fail("unknown chat template '{}' (known: {})", name, names);
}

const ChatTemplate* ChatTemplate::detect(std::string_view jinja) {
  for (const ChatTemplate& t : kTemplates) {
    if (t.spec_->markers.empty()) continue;
    bool all = true;
    for (std::string_view m : t.spec_->markers) all = all && jinja.find(m) != std::string_view::npos;
    if (all) return &t;
  }
  return nullptr;
}

std::string_view ChatTemplate::name() const { return spec_->name; }
std::string_view ChatTemplate::description() const { return spec_->description; }
bool ChatTemplate::starts_thinking() const { return spec_->starts_thinking; }

std::vector<ChatPiece> ChatTemplate::render_message(std::span<const ChatMessage> messages, size_t i,
                                                    const SpecialTexts& sp, bool add_bos) const {
  const Spec& s = *spec_;
  std::vector<ChatPiece> out;
  if (i == 0 && (s.bos == BosRule::kAlways || (s.bos == BosRule::kIfTokenizerAdds && add_bos))) append(out, {kBos}, sp);
  const ChatMessage& m = messages[i];
  switch (m.role) {
    case Role::kSystem:
      if (s.system_opens_user) append(out, s.user_prefix, sp);
      append(out, s.system_prefix, sp);
      append_text(out, m.content);
      append(out, s.system_suffix, sp);
      break;
    case Role::kUser:
      if (!(s.system_opens_user && i > 0 && messages[i - 1].role == Role::kSystem)) append(out, s.user_prefix, sp);
      append_text(out, m.content);
      append(out, s.user_suffix, sp);
      break;
    case Role::kAssistant:
      append(out, s.assistant_prefix, sp);
      append_text(out, m.content);
      append(out, s.assistant_suffix, sp);
      break;
  }
  return out;
}

std::vector<ChatPiece> ChatTemplate::generation_prompt(const SpecialTexts& sp) const {
  std::vector<ChatPiece> out;
  append(out, spec_->generation_prompt, sp);
  return out;
}

std::vector<ChatPiece> ChatTemplate::reply_end(const SpecialTexts& sp) const {
  std::vector<ChatPiece> out;
  append(out, spec_->assistant_suffix, sp);
  return out;
}

std::vector<ChatPiece> ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                            const SpecialTexts& sp, bool add_bos) const {
  std::vector<ChatPiece> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    std::vector<ChatPiece> m = render_message(messages, i, sp, add_bos);
    out.insert(out.end(), m.begin(), m.end());
  }
  if (add_generation_prompt) {
    std::vector<ChatPiece> g = generation_prompt(sp);
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}

}  // namespace latte
