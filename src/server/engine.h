// The server's engine: one thread that owns a BatchSession with one sequence per slot and runs
// continuous batching. HTTP handler threads submit jobs into a bounded queue and read each job's
// updates from its UpdateChannel. Every step the engine
//   - drops the jobs whose client went away and admits queued jobs into free slots, each into the
//     one whose cache holds most of its prompt (prompt_cache.h): a slot keeps its last
//     conversation's tokens cached after the request ends, and only the rest is evaluated; the
//     published pages of the shared cache pool (BatchSession::reuse_prefix) may hold more,
//   - gives each slot pool pages for its tokens of the step (idle slots give theirs up first); a
//     prompt waits for pages, a generating slot without one ends (finish_reason "length"),
//   - evaluates, in one BatchSession::step, the last sampled token of every generating slot plus
//     chunks of the prompts being read, within a budget of n_batch tokens (decode tokens first, so
//     a long prompt never holds up the others' next token),
//   - samples each generating slot's next token with the job's own Sampler and pushes its text.
// So jobs join and leave the batch at any step.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/model/model.h"
#include "src/runtime/batch_session.h"
#include "src/sampling/sampling_params.h"
#include "src/server/update_channel.h"
#include "src/tokenizer/tokenizer.h"

namespace latte::server {

struct EngineOptions {
  int n_slots = 4;
  SessionOptions session;    // n_ctx: each slot's context; n_batch: the tokens of one step
  int max_queued = 64;       // jobs waiting for a slot; one more is refused (503)
  bool prompt_cache = true;  // reuse the prefix a slot's cache shares with a new prompt (--no-cache-prompt: off)
  CachePoolOptions pool;     // tokens: the slots' shared cache pool (--cache-mem); 0: n_ctx for every slot
};

// What a request asks the engine for.
struct EngineJob {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;
  int64_t max_tokens = -1;  // -1: until end of generation or a full context
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool chat = false;             // split <think> spans off into reasoning; trim the reply's opening whitespace
  bool starts_thinking = false;  // the chat template's generation prompt opened a <think> span
  bool cache_prompt = true;      // llama-server's field: false evaluates the whole prompt afresh
  int logprobs = -1;             // -1: none; else each token's logprob and this many alternatives (token_logprobs.h)
};

struct SlotInfo {
  int id = 0;
  std::string state = "idle";  // idle, prompt (reading the prompt), generating
  int64_t n_past = 0;
  int64_t n_ctx = 0;
  int64_t prompt_tokens = 0;     // of the job in the slot
  int64_t generated_tokens = 0;  // so far
  int64_t cached_tokens = 0;     // of the prompt of the job in the slot (or the last one), taken from the cache
};

struct EngineMetrics {
  uint64_t requests_total = 0;              // jobs finished (stopped, cut at a limit or cancelled)
  uint64_t requests_cancelled = 0;          // of those, the ones whose client went away
  uint64_t prompt_tokens_total = 0;         // of the jobs admitted, cached ones included
  uint64_t prompt_tokens_cached_total = 0;  // of those, the ones taken from a slot's cache
  uint64_t generated_tokens_total = 0;
  uint64_t cache_full_total = 0;  // jobs ended early for want of cache pages
  CachePoolStats pool;            // the slots' cache pages
  int processing = 0;             // jobs in slots
  int queued = 0;                 // jobs waiting for a slot
  int n_slots = 0;
};

class Engine {
 public:
  // The model and tokenizer must outlive the engine. Starts the engine thread.
  Engine(const Model& model, const Tokenizer& tokenizer, EngineOptions options);
  ~Engine();  // stop()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a job. Throws ApiError: 400 for an empty prompt, a token outside the vocabulary or a
  // prompt longer than a slot's context; 503 when the queue is full or the engine is draining.
  std::shared_ptr<UpdateChannel> submit(EngineJob job);

  // From now on submit() refuses (503: the server is shutting down); running jobs go on.
  void drain();
  // Ends every job now, each with its last update (finish_reason "length"), queued ones too.
  void cut_all();
  // Whether no job is queued or in a slot.
  bool idle() const;
  // Cuts what runs and ends the thread.
  void stop();

  int n_slots() const { return options_.n_slots; }
  int max_queued() const { return options_.max_queued; }
  int64_t slot_context() const { return options_.session.n_ctx; }
  // Tokens the slots' cache pool holds at most (whole pages), and the tokens of one page.
  int64_t pool_tokens() const { return pool_tokens_; }
  int64_t page_tokens() const { return page_tokens_; }
  EngineMetrics metrics() const;
  // The engine's sequences, for what does not change once it runs (the placement, the device).
  const BatchSession& batch() const { return *batch_; }
  std::vector<SlotInfo> slots() const;

 private:
  struct Slot;
  struct QueuedJob {
    EngineJob job;
    std::shared_ptr<UpdateChannel> channel;
  };

  void run();
  void admit_locked();
  void step();
  void sample_next(Slot& slot, std::span<float> logits);
  // Sends the job's last update and frees the slot (its cache stays, for a later prompt to reuse).
  void finish(Slot& slot, const std::string& reason, const std::string& error = {});
  void publish_locked();

  const Model& model_;
  const Tokenizer& tokenizer_;
  EngineOptions options_;
  std::unique_ptr<BatchSession> batch_;
  int64_t pool_tokens_ = 0, page_tokens_ = 0;
  std::vector<std::unique_ptr<Slot>> slots_;  // touched by the engine thread only
  uint64_t admissions_ = 0;                   // jobs admitted so far: the slots' last_used clock

  mutable std::mutex mutex_;  // guards what follows
  std::condition_variable wake_;
  std::deque<QueuedJob> queue_;
  bool draining_ = false, cut_ = false, stop_ = false;
  std::vector<SlotInfo> published_;  // the slots as of the last step, for /slots and /metrics
  EngineMetrics metrics_;

  std::thread thread_;
};

}  // namespace latte::server
