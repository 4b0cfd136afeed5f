// What the engine thread hands one request's HTTP handler: the reply's text as it is generated and,
// last, how it ended. The engine only ever pushes (it never waits for a client, so a slow reader
// cannot stall the batch); the handler waits with a timeout, so it can check its connection in
// between; cancel() is the handler telling the engine that the client went away.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "src/server/token_logprobs.h"

namespace latte::server {

struct ReplyUpdate {
  std::string content;                 // answer text since the previous update
  std::string reasoning;               // <think>...</think> text since the previous update (chat only)
  std::vector<TokenLogprob> logprobs;  // of the tokens generated since the previous update, when asked
  bool done = false;                   // the last update of the request; the fields below are set on it
  std::string finish_reason;           // "stop" (end of generation or a stop string) or "length"
  std::string error;                   // not empty: the engine failed the request (a 500)
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // of the prompt tokens, those taken from the prompt cache
  int64_t completion_tokens = 0;
};

class UpdateChannel {
 public:
  void push(ReplyUpdate update) {
    {
      std::lock_guard lock(mutex_);
      updates_.push_back(std::move(update));
    }
    ready_.notify_one();
  }

  // Every update that arrived, waiting up to `timeout` for the first one (empty: none came).
  std::vector<ReplyUpdate> wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    ready_.wait_for(lock, timeout, [this] { return !updates_.empty(); });
    std::vector<ReplyUpdate> out(std::make_move_iterator(updates_.begin()), std::make_move_iterator(updates_.end()));
    updates_.clear();
    return out;
  }

  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<ReplyUpdate> updates_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace latte::server
