#include "src/chat/conversation.h"

#include "ggml-like/core/error.h"

namespace latte {
namespace {

std::string token_text_or_empty(const Tokenizer& t, int32_t id) { return id >= 0 ? t.token_text(id) : std::string(); }

}  // namespace

Conversation::Conversation(const ChatTemplate& chat_template, const Tokenizer& tokenizer)
    : template_(&chat_template),
      tokenizer_(&tokenizer),
      specials_{token_text_or_empty(tokenizer, tokenizer.bos()), token_text_or_empty(tokenizer, tokenizer.eos())} {}

std::vector<int32_t> Conversation::tokenize(std::span<const ChatPiece> pieces) const {
  std::vector<int32_t> out;
  std::string run;  // plain text waiting to be tokenized in one go
  auto flush = [&] {
    if (run.empty()) return;
    std::vector<int32_t> ids = tokenizer_->encode(run, false, false);
    out.insert(out.end(), ids.begin(), ids.end());
    run.clear();
  };
  for (const ChatPiece& p : pieces) {
    if (p.special) {
      // A marker the vocabulary lacks (e.g. ChatML forced onto a story model) stays text.
      std::vector<int32_t> ids = tokenizer_->encode(p.text, false, true);
      if (ids.size() == 1 && tokenizer_->token_text(ids[0]) == p.text) {
        flush();
        out.push_back(ids[0]);
        continue;
      }
    }
    run += p.text;
  }
  flush();
  return out;
}

void Conversation::render(size_t i) {
  std::vector<ChatMessage> view;
  view.reserve(i + 1);
  for (size_t j = 0; j <= i; ++j) view.push_back({messages_[j].role, messages_[j].content});
  messages_[i].tokens = tokenize(template_->render_message(view, i, specials_, tokenizer_->add_bos_default()));
}

void Conversation::set_system(std::string text) {
  if (text.empty()) {
    if (has_system()) messages_.erase(messages_.begin());
    if (!messages_.empty() && messages_[0].role == Role::kUser) render(0);
    return;
  }
  if (has_system())
    messages_[0].content = std::move(text);
  else
    messages_.insert(messages_.begin(), Message{Role::kSystem, std::move(text), {}});
  render(0);
  if (messages_.size() > 1 && messages_[1].role == Role::kUser) render(1);
}

void Conversation::add_user(std::string text) {
  messages_.push_back({Role::kUser, std::move(text), {}});
  render(messages_.size() - 1);
}

void Conversation::start_reply() {
  messages_.push_back({Role::kAssistant, "", tokenize(template_->generation_prompt(specials_))});
}

void Conversation::extend_reply(std::span<const int32_t> tokens, std::string_view text) {
  if (messages_.empty() || messages_.back().role != Role::kAssistant) ggl::fail("no reply is open");
  Message& m = messages_.back();
  m.tokens.insert(m.tokens.end(), tokens.begin(), tokens.end());
  m.content += text;
}

void Conversation::end_reply(bool trim_leading_space) {
  if (messages_.empty() || messages_.back().role != Role::kAssistant) ggl::fail("no reply is open");
  Message& m = messages_.back();
  if (trim_leading_space) m.content.erase(0, m.content.find_first_not_of(" \t\r\n"));
  const std::vector<int32_t> end = tokenize(template_->reply_end(specials_));
  m.tokens.insert(m.tokens.end(), end.begin(), end.end());
}

void Conversation::clear_turns() { messages_.resize(has_system() ? 1 : 0); }

bool Conversation::drop_oldest_turn(size_t keep_last) {
  const size_t first = has_system() ? 1 : 0;
  if (first >= messages_.size() || messages_[first].role != Role::kUser) return false;
  size_t end = first + 1;
  while (end < messages_.size() && messages_[end].role != Role::kUser) ++end;
  if (end + keep_last > messages_.size()) return false;
  messages_.erase(messages_.begin() + static_cast<std::ptrdiff_t>(first),
                  messages_.begin() + static_cast<std::ptrdiff_t>(end));
  if (first < messages_.size() && messages_[first].role == Role::kUser) render(first);
  return true;
}

void Conversation::replace(std::vector<Message> messages) {
  messages_ = std::move(messages);
  for (size_t i = 0; i < messages_.size(); ++i)
    if (messages_[i].tokens.empty()) render(i);
}

std::vector<int32_t> Conversation::tokens() const {
  std::vector<int32_t> all;
  all.reserve(n_tokens());
  for (const Message& m : messages_) all.insert(all.end(), m.tokens.begin(), m.tokens.end());
  return all;
}

size_t Conversation::n_tokens() const {
  size_t n = 0;
  for (const Message& m : messages_) n += m.tokens.size();
  return n;
}

}  // namespace latte
