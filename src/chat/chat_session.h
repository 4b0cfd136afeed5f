// A conversation bound to an evaluation session: keeps the model's cache in step with the
// conversation so each turn evaluates only what is new, generates replies, and makes room when the
// context would overflow.
//
// The cache is kept as a list of the token ids it holds. Before a reply the conversation's token
// list is compared with it: the common prefix stays, the rest is evaluated. After a normal turn
// the prefix is everything but the reply's closing markup, the new user message and the
// generation prompt, which are exactly the tokens evaluated.
//
// Overflow: the oldest turns (after the system prompt) are dropped until the conversation plus
// room for a reply fits. The kept turns after them are then recomputed (exact: what a fresh
// session would hold), or with context_shift their cache rows are moved and re-rotated
// (src/runtime/cache_shift.h: instant, but approximate in every layer after the first).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "src/chat/conversation.h"
#include "src/generate/generate.h"
#include "src/runtime/session.h"
#include "src/sampling/sampler.h"

namespace latte {

struct ChatOptions {
  int64_t n_predict = -1;      // tokens per reply; -1: until end of generation
  bool ignore_eos = false;     // never end a reply at an end-of-generation token
  bool context_shift = false;  // on overflow shift the cache instead of recomputing the kept turns
};

struct TurnStats {
  int64_t reused = 0;         // context tokens found in the cache
  int64_t evaluated = 0;      // tokens evaluated before the reply: the new ones
  int64_t reevaluated = 0;    // tokens evaluated again during the reply after dropping turns
  int64_t generated = 0;      // tokens sampled (an end-of-generation token included)
  int64_t dropped_turns = 0;  // old turns dropped to make room
  int64_t shifted = 0;        // cached tokens moved by a context shift instead of recomputed
  double prompt_seconds = 0;
  double reply_seconds = 0;
  StopReason reason = StopReason::kEndOfGeneration;
};

class ChatSession {
 public:
  using TextFn = std::function<void(std::string_view)>;

  // Everything passed in must outlive the chat.
  ChatSession(Session& session, const Tokenizer& tokenizer, const ChatTemplate& chat_template, Sampler& sampler,
              ChatOptions options);

  // Adds the user's message and generates the reply, streaming its text to on_text; on_note gets
  // remarks (dropped turns). `stop` is polled between tokens. Throws ggl::Error, leaving the
  // conversation as it was, when the message cannot fit the context.
  TurnStats respond(std::string user_text, const std::atomic<bool>* stop, const TextFn& on_text, const TextFn& on_note);

  // Forgets every message but the system prompt, and the whole cache.
  void reset();
  // Sets (or with empty text removes) the system prompt; the next turn re-evaluates what follows it.
  void set_system(std::string text);
  // Replaces the conversation (e.g. loaded from a file); nothing is cached afterwards...
  void replace_conversation(std::vector<Message> messages);
  // ... until the cache rows of its first n tokens have been written (src/runtime/cache_io.h).
  void adopt_cache(int64_t n);

  const Conversation& conversation() const { return conversation_; }
  const Session& session() const { return session_; }
  Session& session() { return session_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const Sampler& sampler() const { return sampler_; }
  const std::vector<int32_t>& cached_tokens() const { return cached_; }
  const ChatOptions& options() const { return options_; }

  const TurnStats& last_turn() const { return last_; }
  int64_t turns() const { return turns_; }
  int64_t total_evaluated() const { return total_evaluated_; }
  int64_t total_generated() const { return total_generated_; }

 private:
  // Makes the cache hold exactly `target` (evaluating what is missing); returns the logits after
  // its last token. Adds the count of evaluated tokens to *evaluated.
  std::vector<float> sync(const std::vector<int32_t>& target, int64_t* evaluated);
  // Drops old turns (keeping the last keep_last messages) until the conversation plus `reserve`
  // tokens fits; returns how many were dropped.
  int64_t make_room(int64_t reserve, size_t keep_last, TurnStats& stats, const TextFn& on_note);
  void prime_sampler(const std::vector<int32_t>& context);

  Session& session_;
  const Tokenizer& tokenizer_;
  Sampler& sampler_;
  ChatOptions options_;
  Conversation conversation_;
  std::vector<int32_t> cached_;  // the ids in cache rows 0..n_past-1
  TurnStats last_;
  int64_t turns_ = 0, total_evaluated_ = 0, total_generated_ = 0;
};

}  // namespace latte
