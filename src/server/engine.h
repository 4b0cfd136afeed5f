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
//
// Across the ranks of an MPI job (`mpirun -np N latte serve`, EngineOptions::job): every rank
// runs an engine with its own slots and caches (data parallelism: BatchSession's data_parallel),
// and the engines step together, the MoE layers taking every rank's tokens. Rank 0 takes the HTTP
// requests; at each step it sends every rank the jobs it gives it (each to the rank with a free
// slot and the fewest active tokens) and the cancellations, and every rank answers with its
// slots' state and its jobs' reply updates, which rank 0 passes to their handlers
// (Engine::run_across_ranks, engine_ranks.cpp).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/model/model.h"
#include "src/parallel/job.h"
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
  // The MPI job whose ranks serve together (each with n_slots slots); nullptr or a job of one:
  // this process alone. Every rank constructs its engine; only rank 0's takes jobs.
  Job* job = nullptr;
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
  int id = 0;                  // across ranks: rank * n_slots + the rank's slot
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
  int n_slots = 0;                // of every rank
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

  int n_slots() const { return options_.n_slots; }  // of this rank
  int ranks() const { return job_ ? job_->size() : 1; }
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

  struct RankLoad {  // a rank's slots, as rank 0 knows them from the rank's last report
    int idle_slots = 0;
    int64_t active_tokens = 0;  // the tokens its busy slots hold and are to evaluate
    std::vector<SlotInfo> slots;
  };

  bool across_ranks() const { return job_ && !job_->alone(); }
  void run();
  // The engine thread across the ranks (engine_ranks.cpp): one step of every rank's engine per
  // turn, rank 0's plan first and every rank's report after it.
  void run_across_ranks();
  // Rank 0: the turn's plan (jobs given to the other ranks, cancellations, cut, stop), taking the
  // jobs it gives away out of the queue; waits while no rank has work.
  std::string plan_turn();
  // Every rank: carries out the plan; returns false when the server stops.
  bool apply_plan(const std::string& plan);
  // Every rank: its slots and its jobs' updates since the last report.
  std::string report();
  // Rank 0: passes the other ranks' updates to their handlers and records their loads.
  void take_reports(const std::vector<std::string>& reports);
  // Ends every queued job, and every running one, with what it has ("length").
  void cut_everything_locked(std::unique_lock<std::mutex>& lock);
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

  // Across ranks (touched by the engine thread only, but for loads_, under mutex_).
  Job* job_ = nullptr;
  uint64_t next_job_id_ = 0;                                       // rank 0: numbers the jobs it gives away
  std::map<uint64_t, std::shared_ptr<UpdateChannel>> given_away_;  // rank 0: their handlers' channels
  std::map<uint64_t, std::shared_ptr<UpdateChannel>> taken_;       // other ranks: the jobs rank 0 gave them
  std::vector<RankLoad> loads_;                                    // rank 0: every rank's (its own unused)

  std::thread thread_;
};

}  // namespace latte::server
