#include "src/chat/chat_session.h"

#include <fmt/format.h>

#include <algorithm>

#include "ggml-like/core/error.h"
#include "src/runtime/cache_shift.h"
#include "src/runtime/stopwatch.h"

namespace latte {
namespace {

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  return static_cast<size_t>(
      std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(std::min(a.size(), b.size())), b.begin()).first -
      a.begin());
}

}  // namespace

ChatSession::ChatSession(Session& session, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                         Sampler& sampler, ChatOptions options)
    : session_(session),
      tokenizer_(tokenizer),
      sampler_(sampler),
      options_(options),
      conversation_(chat_template, tokenizer) {}

std::vector<float> ChatSession::sync(const std::vector<int32_t>& target, int64_t* evaluated) {
  if (target.empty()) ggl::fail("nothing to evaluate");
  size_t keep = common_prefix(cached_, target);
  if (keep == target.size()) --keep;  // all cached: evaluate the last token again for its logits
  session_.truncate(static_cast<int64_t>(keep));
  cached_.resize(keep);  // still true if eval throws
  std::vector<float> logits = session_.eval(std::span(target).subspan(keep), Logits::kLast);
  cached_ = target;
  *evaluated += static_cast<int64_t>(target.size() - keep);
  return logits;
}

int64_t ChatSession::make_room(int64_t reserve, size_t keep_last, TurnStats& stats, const TextFn& on_note) {
  int64_t dropped = 0;
  size_t dropped_tokens = 0;
  bool shifted = false;
  while (static_cast<int64_t>(conversation_.n_tokens()) + reserve > session_.n_ctx()) {
    const std::vector<int32_t> before = conversation_.tokens();
    if (!conversation_.drop_oldest_turn(keep_last)) break;
    const std::vector<int32_t> after = conversation_.tokens();
    ++dropped;
    dropped_tokens += before.size() - after.size();
    if (!options_.context_shift) continue;  // sync() recomputes from where the conversation changed
    // A shift is possible when the drop removed one cached stretch and left the rest as it was.
    const size_t begin = common_prefix(before, after), d = before.size() - after.size();
    const size_t n = cached_.size();
    if (begin + d > n || !std::equal(cached_.begin() + static_cast<std::ptrdiff_t>(begin + d), cached_.end(),
                                     after.begin() + static_cast<std::ptrdiff_t>(begin),
                                     after.begin() + static_cast<std::ptrdiff_t>(std::min(after.size(), n - d))))
      continue;
    remove_cached_tokens(session_, static_cast<int64_t>(begin), static_cast<int64_t>(begin + d));
    cached_.erase(cached_.begin() + static_cast<std::ptrdiff_t>(begin),
                  cached_.begin() + static_cast<std::ptrdiff_t>(begin + d));
    stats.shifted += static_cast<int64_t>(n - begin - d);
    shifted = true;
  }
  if (dropped > 0)
    on_note(fmt::format("context full: dropped the {} oldest turn{} ({} tokens){}", dropped, dropped == 1 ? "" : "s",
                        dropped_tokens, shifted ? ", shifted the cache of the rest" : ", the rest is evaluated again"));
  stats.dropped_turns += dropped;
  return dropped;
}

void ChatSession::prime_sampler(const std::vector<int32_t>& context) {
  // The repetition penalty sees the conversation, as it would after evaluating it in one go: the
  // same context always gives the same sampler state (a loaded conversation included).
  sampler_.reset();
  const int32_t window = sampler_.params().repeat_last_n;
  const size_t n = window < 0 ? context.size() : std::min(context.size(), static_cast<size_t>(window));
  for (size_t i = context.size() - n; i < context.size(); ++i) sampler_.accept(context[i]);
}

TurnStats ChatSession::respond(std::string user_text, const std::atomic<bool>* stop, const TextFn& on_text,
                               const TextFn& on_note) {
  TurnStats stats;
  const Stopwatch prompt_time;
  conversation_.add_user(std::move(user_text));
  conversation_.start_reply();
  const int64_t n_ctx = session_.n_ctx();
  // Room for a reply: its limit, or a quarter of the context when it has none.
  const int64_t reserve = options_.n_predict >= 0 ? std::min(options_.n_predict, n_ctx / 2) : n_ctx / 4;
  make_room(reserve, 2, stats, on_note);
  if (static_cast<int64_t>(conversation_.n_tokens()) >= n_ctx) {
    const size_t n_new = conversation_.messages().back().tokens.size() +
                         conversation_.messages()[conversation_.messages().size() - 2].tokens.size();
    conversation_.pop_back();
    conversation_.pop_back();
    ggl::fail("the message needs {} tokens and does not fit the context of {} tokens{} (raise -c)", n_new, n_ctx,
              conversation_.messages().empty() ? "" : " after what must be kept");
  }

  const std::vector<int32_t> context = conversation_.tokens();
  std::vector<float> logits = sync(context, &stats.evaluated);
  stats.reused = static_cast<int64_t>(context.size()) - stats.evaluated;
  stats.prompt_seconds = prompt_time.seconds();

  prime_sampler(context);
  const Stopwatch reply_time;
  StreamDecoder decoder(tokenizer_, {.render_special = false, .strip_leading_space = false});
  int64_t budget = options_.n_predict;
  std::string text;
  const std::function<void(std::string_view)> collect = [&](std::string_view piece) {
    text += piece;
    on_text(piece);
  };
  while (true) {
    GenerateOptions g;
    g.max_tokens = budget;
    g.stop = stop;
    g.ignore_eog = options_.ignore_eos;
    GenerateResult r = generate(session_, sampler_, tokenizer_, decoder, std::move(logits), g, collect);
    stats.generated += static_cast<int64_t>(r.tokens.size());
    stats.reason = r.reason;
    if (budget >= 0) budget -= static_cast<int64_t>(r.tokens.size());
    if (r.reason == StopReason::kEndOfGeneration) r.tokens.pop_back();  // sampled, never evaluated
    conversation_.extend_reply(r.tokens, text);
    text.clear();
    cached_.insert(cached_.end(), r.tokens.begin(), r.tokens.end());
    cached_.resize(static_cast<size_t>(session_.n_past()));
    if (r.reason != StopReason::kContextFull || budget == 0) break;
    // Out of room in the middle of the reply: drop old turns and go on from the last token.
    if (make_room(std::min<int64_t>(budget < 0 ? n_ctx / 4 : budget, n_ctx / 4), 2, stats, on_note) == 0) break;
    logits = sync(conversation_.tokens(), &stats.reevaluated);
  }
  conversation_.end_reply(/*trim_leading_space=*/&conversation_.chat_template() != &ChatTemplate::plain());
  stats.reply_seconds = reply_time.seconds();

  last_ = stats;
  ++turns_;
  total_evaluated_ += stats.evaluated + stats.reevaluated;
  total_generated_ += stats.generated;
  return stats;
}

void ChatSession::reset() {
  conversation_.clear_turns();
  session_.clear();
  cached_.clear();
}

void ChatSession::set_system(std::string text) { conversation_.set_system(std::move(text)); }

void ChatSession::replace_conversation(std::vector<Message> messages) {
  conversation_.replace(std::move(messages));
  session_.clear();
  cached_.clear();
}

void ChatSession::adopt_cache(int64_t n) {
  const std::vector<int32_t> all = conversation_.tokens();
  if (n < 0 || n > static_cast<int64_t>(all.size()) || n != session_.n_past())
    ggl::fail("the cache holds {} tokens, not the first {} of the conversation", session_.n_past(), n);
  cached_.assign(all.begin(), all.begin() + n);
}

}  // namespace latte
