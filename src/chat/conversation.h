// The state of a chat: its messages and the token ids each one stands for in the model's context.
//
// Every message keeps the exact ids it contributed, markup included: a user message is rendered by
// the chat template and tokenized once; an assistant message holds the generation prompt, the
// tokens the model actually sampled (not a re-tokenization of their text) and the template's
// closing markup. So the conversation's token list always extends what is already in the cache,
// and a new turn only has to evaluate the tokens added since (chat_session.h diffs the two).
//
// Tokenization keeps the template's markup apart from the text: pieces marked special become
// their single special token; runs of plain text, the user's words included, are tokenized with
// special-token parsing off, so typing "<|im_end|>" cannot inject a control token.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/chat/chat_template.h"
#include "src/tokenizer/tokenizer.h"

namespace latte {

struct Message {
  Role role;
  std::string content;
  std::vector<int32_t> tokens;
};

class Conversation {
 public:
  // The template and tokenizer must outlive the conversation.
  Conversation(const ChatTemplate& chat_template, const Tokenizer& tokenizer);

  const ChatTemplate& chat_template() const { return *template_; }
  const std::vector<Message>& messages() const { return messages_; }
  bool has_system() const { return !messages_.empty() && messages_[0].role == Role::kSystem; }

  // Sets, replaces or (with empty text) removes the system prompt, which is always the first
  // message. The message after it is re-rendered (its markup may depend on what precedes it).
  void set_system(std::string text);
  void add_user(std::string text);
  // Opens the assistant's reply: a message holding the generation prompt.
  void start_reply();
  // Appends sampled tokens (no end-of-generation token) and their text to the open reply.
  void extend_reply(std::span<const int32_t> tokens, std::string_view text);
  // Closes the reply with the template's end markup (e.g. EOS). trim_leading_space drops the
  // whitespace the reply text starts with (after a prompt like "Assistant:").
  void end_reply(bool trim_leading_space);
  // Removes the last message (an unanswered user turn, after an error).
  void pop_back() { messages_.pop_back(); }

  // Forgets every message but the system prompt.
  void clear_turns();
  // Removes the oldest user turn and the reply after it (never the system prompt nor the last
  // `keep_last` messages); re-renders the message that moves up. False when there is none to drop.
  bool drop_oldest_turn(size_t keep_last);
  // Replaces every message (loaded from a file). Messages without tokens are rendered here.
  void replace(std::vector<Message> messages);

  // All token ids, in order.
  std::vector<int32_t> tokens() const;
  size_t n_tokens() const;

  // Token ids of rendered pieces, as described above.
  std::vector<int32_t> tokenize(std::span<const ChatPiece> pieces) const;
  const SpecialTexts& special_texts() const { return specials_; }

 private:
  void render(size_t i);  // (re)computes message i's tokens from its text

  const ChatTemplate* template_;
  const Tokenizer* tokenizer_;
  SpecialTexts specials_;
  std::vector<Message> messages_;
};

}  // namespace latte
