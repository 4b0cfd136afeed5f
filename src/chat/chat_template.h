// Chat templates: how a conversation (system prompt, user and assistant messages) is laid out as
// text for a model, one table row per template family, and recognition of a model's own Jinja
// template (`tokenizer.chat_template`) by its distinctive markers.
//
// Rendering yields pieces: the template's special tokens (BOS, <|im_start|>, <｜User｜>, ...) are
// pieces of their own, marked special, so that only they become special tokens; everything else,
// the user's text included, is plain text that is tokenized without special-token parsing (see
// conversation.h). to_text() joins the pieces into the string the template describes.
//
//   const ChatTemplate& t = ChatTemplate::by_name("chatml");
//   std::string s = to_text(t.render(messages, /*add_generation_prompt=*/true, {"<s>", "</s>"}));
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace latte {

enum class Role { kSystem, kUser, kAssistant };
std::string_view role_name(Role r);  // "system", "user", "assistant"
std::optional<Role> parse_role(std::string_view s);

struct ChatMessage {
  Role role;
  std::string content;
};

struct ChatPiece {
  std::string text;
  bool special = false;  // exactly one special token of the vocabulary
};

// The texts of the tokenizer's BOS and EOS tokens (empty when it has none).
struct SpecialTexts {
  std::string bos, eos;
};

std::string to_text(std::span<const ChatPiece> pieces);

class ChatTemplate {
 public:
  struct Spec;  // the table row (chat_template.cpp)

  // Every template, in the order --list-templates shows them.
  static std::span<const ChatTemplate> all();
  // Throws ggl::Error listing the names when there is no such template.
  static const ChatTemplate& by_name(std::string_view name);
  // The template a Jinja chat template text stands for, recognised by its markers; nullptr when
  // none matches.
  static const ChatTemplate* detect(std::string_view jinja);
  static const ChatTemplate& plain();

  std::string_view name() const;
  std::string_view description() const;
  // Reasoning models whose generation prompt opens a <think> span: the reply starts inside it.
  bool starts_thinking() const;

  // The pieces message i contributes, given the messages before it (a conversation starts with
  // the BOS piece where the template has one; Llama-2 puts the system prompt inside the first
  // user turn). add_bos says whether the tokenizer adds BOS by default (for the plain template).
  std::vector<ChatPiece> render_message(std::span<const ChatMessage> messages, size_t i, const SpecialTexts& sp,
                                        bool add_bos = true) const;
  // What precedes a generated reply (e.g. "<|im_start|>assistant\n"), and what closes it.
  std::vector<ChatPiece> generation_prompt(const SpecialTexts& sp) const;
  std::vector<ChatPiece> reply_end(const SpecialTexts& sp) const;

  // The whole conversation, optionally followed by the generation prompt.
  std::vector<ChatPiece> render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                const SpecialTexts& sp, bool add_bos = true) const;

  explicit ChatTemplate(const Spec* spec) : spec_(spec) {}

 private:
  const Spec* spec_;
};

}  // namespace latte
