#include "src/server/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <optional>

#include "ggml-like/core/error.h"
#include "src/sampling/sampler.h"
#include "src/server/api_error.h"
#include "src/server/prompt_cache.h"
#include "src/server/reply_text.h"
#include "src/server/token_logprobs.h"
#include "src/server/token_penalties.h"

namespace latte::server {

struct Engine::Slot {
  int id = 0;
  // The job in the slot; none when idle.
  std::optional<EngineJob> job;
  std::shared_ptr<UpdateChannel> channel;
  std::optional<Sampler> sampler;
  std::optional<TokenPenalties> penalties;
  std::unique_ptr<ReplyText> text;
  size_t prompt_done = 0;   // prompt tokens evaluated
  int32_t last_token = -1;  // sampled, to be evaluated in the next step
  int64_t generated = 0;
  int64_t n_past = 0;
  int64_t reused = 0;                  // prompt tokens of the current (or last) job taken from the cache
  uint64_t last_used = 0;              // Engine::admissions_ when a job last entered
  std::vector<TokenLogprob> logprobs;  // not yet sent
  int64_t text_offset = 0;             // of the next token's text among the reply's token texts

  bool busy() const { return job.has_value(); }
  bool reading_prompt() const { return busy() && prompt_done < job->prompt.size(); }
};

Engine::Engine(const Model& model, const Tokenizer& tokenizer, EngineOptions options)
    : model_(model), tokenizer_(tokenizer), options_(std::move(options)), job_(options_.job) {
  if (options_.n_slots < 1) ggl::fail("{} slots: there must be at least one", options_.n_slots);
  if (across_ranks()) {
    options_.session.data_parallel = true;
    loads_.resize(static_cast<size_t>(job_->size()));
  }
  batch_ = std::make_unique<BatchSession>(model_, options_.n_slots, options_.session, options_.pool);
  options_.session.n_ctx = batch_->n_ctx();
  const CachePoolStats pool = batch_->pool_stats();
  pool_tokens_ = pool.pages * pool.page_tokens;
  page_tokens_ = pool.page_tokens;
  for (int i = 0; i < options_.n_slots; ++i) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->id = i;
  }
  metrics_.n_slots = options_.n_slots * ranks();
  publish_locked();
  thread_ = std::thread([this] { across_ranks() ? run_across_ranks() : run(); });
}

Engine::~Engine() { stop(); }

std::shared_ptr<UpdateChannel> Engine::submit(EngineJob job) {
  if (job.prompt.empty()) bad_request("the prompt is empty (and the model adds no BOS token)");
  const int64_t n_vocab = model_.hparams().n_vocab;
  for (int32_t t : job.prompt)
    if (t < 0 || t >= n_vocab) bad_request("token id {} is outside the vocabulary (0..{})", t, n_vocab - 1);
  if (static_cast<int64_t>(job.prompt.size()) > slot_context())
    bad_request("the prompt has {} tokens, more than the context of {} tokens of a slot", job.prompt.size(),
                slot_context());
  if (static_cast<int64_t>(job.prompt.size()) > pool_tokens_)
    bad_request("the prompt has {} tokens, more than the {} the cache pool holds (--cache-mem)", job.prompt.size(),
                pool_tokens_);
  try {
    job.sampling.validate();
  } catch (const ggl::Error& e) {
    bad_request("{}", e.what());
  }
  auto channel = std::make_shared<UpdateChannel>();
  {
    std::lock_guard lock(mutex_);
    if (draining_ || stop_) throw ApiError(503, "unavailable_error", "the server is shutting down");
    // Jobs in the queue take the idle slots first; beyond those, max_queued may wait.
    const auto idle_slots =
        std::count_if(published_.begin(), published_.end(), [](const SlotInfo& s) { return s.state == "idle"; });
    if (static_cast<int64_t>(queue_.size()) >= options_.max_queued + idle_slots)
      throw ApiError(
          503, "unavailable_error",
          fmt::format("the server is busy: {} requests are waiting for a slot (--max-queued); try again later",
                      queue_.size()));
    queue_.push_back({std::move(job), channel});
    metrics_.queued = static_cast<int>(queue_.size());
  }
  wake_.notify_one();
  return channel;
}

void Engine::drain() {
  std::lock_guard lock(mutex_);
  draining_ = true;
}

void Engine::cut_all() {
  {
    std::lock_guard lock(mutex_);
    cut_ = true;
  }
  wake_.notify_one();
}

void Engine::stop() {
  {
    std::lock_guard lock(mutex_);
    draining_ = cut_ = stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

bool Engine::idle() const {
  std::lock_guard lock(mutex_);
  return queue_.empty() && metrics_.processing == 0 && given_away_.empty();
}

EngineMetrics Engine::metrics() const {
  std::lock_guard lock(mutex_);
  return metrics_;
}

std::vector<SlotInfo> Engine::slots() const {
  std::lock_guard lock(mutex_);
  return published_;
}

void Engine::publish_locked() {
  published_.clear();
  int processing = 0;
  const int rank = job_ ? job_->rank() : 0;
  for (const auto& s : slots_) {
    SlotInfo info;
    info.id = rank * options_.n_slots + s->id;
    info.n_ctx = slot_context();
    info.n_past = s->n_past;
    if (s->busy()) {
      ++processing;
      info.state = s->reading_prompt() ? "prompt" : "generating";
      info.prompt_tokens = static_cast<int64_t>(s->job->prompt.size());
      info.generated_tokens = s->generated;
    }
    info.cached_tokens = s->reused;
    published_.push_back(info);
  }
  for (size_t r = 1; r < loads_.size(); ++r)  // rank 0 across ranks: the others' slots
    for (const SlotInfo& info : loads_[r].slots) {
      published_.push_back(info);
      processing += info.state != "idle";
    }
  metrics_.processing = processing;
  metrics_.pool = batch_->pool_stats();
  metrics_.queued = static_cast<int>(queue_.size());
}

// Moves queued jobs into free slots (a job whose client already left is dropped), each into the
// slot whose cache holds most of its prompt, keeping or copying that prefix.
void Engine::admit_locked() {
  while (!queue_.empty()) {
    if (queue_.front().channel->cancelled()) {
      queue_.pop_front();
      ++metrics_.requests_total;
      ++metrics_.requests_cancelled;
      continue;
    }
    std::vector<SlotCacheView> views;
    for (const auto& slot : slots_) views.push_back({batch_->cached_tokens(slot->id), !slot->busy(), slot->last_used});
    const EngineJob& next = queue_.front().job;
    const bool use_cache = options_.prompt_cache && next.cache_prompt;
    const PromptCachePlan plan = plan_prompt_cache(views, next.prompt, use_cache);
    if (plan.slot < 0) break;
    QueuedJob q = std::move(queue_.front());
    queue_.pop_front();
    Slot& s = *slots_[static_cast<size_t>(plan.slot)];
    batch_->set_evictable(s.id, false);
    if (!use_cache) {
      batch_->clear(s.id);
    } else {
      if (plan.copy_from >= 0) batch_->copy_prefix(plan.copy_from, s.id, plan.reused);
      // The slot's own rows, or the copied ones, as far as they go; published pages when further.
      batch_->reuse_prefix(s.id, std::span(q.job.prompt).first(q.job.prompt.size() - 1));
    }
    const int64_t reused = batch_->n_past(s.id);
    s.channel = std::move(q.channel);
    s.sampler.emplace(q.job.sampling);
    s.penalties.emplace(q.job.presence_penalty, q.job.frequency_penalty);
    s.text = std::make_unique<ReplyText>(tokenizer_, ReplyText::Options{.stop = q.job.stop,
                                                                        .split_thinking = q.job.chat,
                                                                        .starts_thinking = q.job.starts_thinking,
                                                                        .trim_leading_space = q.job.chat});
    // The prompt counts for the repetition penalty, as in `latte run`.
    for (int32_t t : q.job.prompt) s.sampler->accept(t);
    s.prompt_done = static_cast<size_t>(reused);
    s.n_past = reused;
    s.reused = reused;
    s.last_used = ++admissions_;
    s.generated = 0;
    s.last_token = -1;
    s.logprobs.clear();
    s.text_offset = 0;
    metrics_.prompt_tokens_total += q.job.prompt.size();
    metrics_.prompt_tokens_cached_total += static_cast<uint64_t>(reused);
    s.job = std::move(q.job);
  }
}

void Engine::cut_everything_locked(std::unique_lock<std::mutex>& lock) {
  // Jobs never admitted end with nothing generated; those in slots with what they have.
  for (QueuedJob& q : queue_) {
    ReplyUpdate u;
    u.done = true;
    u.finish_reason = "length";
    u.prompt_tokens = static_cast<int64_t>(q.job.prompt.size());
    q.channel->push(std::move(u));
    ++metrics_.requests_total;
  }
  queue_.clear();
  lock.unlock();
  for (auto& s : slots_)
    if (s->busy()) finish(*s, "length");
  lock.lock();
  cut_ = false;
}

void Engine::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (cut_) cut_everything_locked(lock);
    admit_locked();
    const bool any_busy = std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->busy(); });
    if (!any_busy) {
      publish_locked();
      if (stop_) return;
      wake_.wait(lock, [this] { return stop_ || cut_ || !queue_.empty(); });
      continue;
    }
    lock.unlock();
    step();
    lock.lock();
    publish_locked();
  }
}

void Engine::step() {
  // A client that went away frees its slot before anything else is evaluated for it (what its
  // sequence holds stays cached).
  for (auto& s : slots_) {
    if (s->busy() && s->channel->cancelled()) {
      s->job.reset();
      s->channel.reset();
      s->text.reset();
      std::lock_guard lock(mutex_);
      ++metrics_.requests_total;
      ++metrics_.requests_cancelled;
    }
  }
  std::vector<SequenceTokens> parts;
  std::vector<Slot*> owners;
  int64_t budget = options_.session.n_batch;
  // Decode tokens first; a generating slot the pool has no page for ends there.
  for (auto& s : slots_) {
    if (!s->busy() || s->reading_prompt()) continue;
    if (batch_->reserve(s->id, 1) < 1) {
      {
        std::lock_guard lock(mutex_);
        ++metrics_.cache_full_total;
      }
      finish(*s, "length");
      continue;
    }
    parts.push_back({s->id, {&s->last_token, 1}});
    owners.push_back(s.get());
    --budget;
  }
  // Then prompt chunks, as far as pages go: the rest waits for pages to come free.
  Slot* waiting = nullptr;
  for (auto& s : slots_) {
    if (!s->reading_prompt() || budget <= 0) continue;
    const std::vector<int32_t>& prompt = s->job->prompt;
    const auto wanted = static_cast<int64_t>(std::min(prompt.size() - s->prompt_done, static_cast<size_t>(budget)));
    const auto n = static_cast<size_t>(batch_->reserve(s->id, wanted));
    if (n == 0) {
      if (!waiting || s->last_used > waiting->last_used) waiting = s.get();
      continue;
    }
    parts.push_back({s->id, std::span(prompt).subspan(s->prompt_done, n)});
    owners.push_back(s.get());
    budget -= static_cast<int64_t>(n);
  }
  if (parts.empty() && waiting) {
    // Every slot with work waits for pages only prompts hold: the newest gives way (its pages free
    // the others) rather than all waiting for ever.
    {
      std::lock_guard lock(mutex_);
      ++metrics_.cache_full_total;
    }
    finish(*waiting, "stop",
           fmt::format("the cache pool is full: {} tokens in {}-token pages are held by the prompts being read; "
                       "a larger --cache-mem or fewer --parallel slots would fit them",
                       pool_tokens_, page_tokens_));
  }
  // Across ranks every step meets the other ranks' steps, also one without tokens of this rank's.
  if (parts.empty() && !across_ranks()) return;

  std::vector<float> logits;
  try {
    logits = batch_->step(parts, Logits::kLast);
  } catch (const std::exception& e) {
    // The step changed no sequence (BatchSession's guarantee); its jobs cannot go on.
    for (Slot* s : owners) finish(*s, "stop", e.what());
    return;
  }
  const auto n_vocab = static_cast<size_t>(model_.hparams().n_vocab);
  for (size_t i = 0; i < owners.size(); ++i) {
    Slot& s = *owners[i];
    s.n_past += static_cast<int64_t>(parts[i].tokens.size());
    if (s.reading_prompt()) {
      s.prompt_done += parts[i].tokens.size();
      if (s.reading_prompt()) continue;  // more prompt chunks to come: its logits are not needed
    }
    sample_next(s, std::span(logits).subspan(i * n_vocab, n_vocab));
  }
}

void Engine::sample_next(Slot& s, std::span<float> logits) {
  const EngineJob& job = *s.job;
  // The logprobs are those of the model's distribution: the logits before anything below changes them.
  std::vector<float> raw;
  if (job.logprobs >= 0) raw.assign(logits.begin(), logits.end());
  if (job.ignore_eos)
    for (int32_t t : tokenizer_.eog_ids()) logits[static_cast<size_t>(t)] = -INFINITY;
  s.penalties->apply(logits);
  const int32_t token = s.sampler->sample(logits);
  s.sampler->accept(token);
  s.penalties->accept(token);
  ++s.generated;
  {
    std::lock_guard lock(mutex_);
    ++metrics_.generated_tokens_total;
  }
  if (tokenizer_.is_eog(token)) return finish(s, "stop");
  if (job.logprobs >= 0) {
    TokenLogprob lp = token_logprob(raw, token, job.logprobs, tokenizer_);
    lp.text_offset = s.text_offset;
    s.text_offset += static_cast<int64_t>(lp.token.size());
    s.logprobs.push_back(std::move(lp));
  }
  ReplyDelta delta = s.text->push(token);
  // A token whose text is held back (a possible stop string) still sends its logprob now.
  if (!delta.content.empty() || !delta.reasoning.empty() || !s.logprobs.empty()) {
    ReplyUpdate u;
    u.content = std::move(delta.content);
    u.reasoning = std::move(delta.reasoning);
    u.logprobs = std::move(s.logprobs);
    s.logprobs.clear();
    s.channel->push(std::move(u));
  }
  if (s.text->stopped()) return finish(s, "stop");
  // The token limit, or no room left in the slot to evaluate the token just sampled.
  if ((job.max_tokens > 0 && s.generated >= job.max_tokens) || s.n_past >= slot_context()) return finish(s, "length");
  s.last_token = token;
}

void Engine::finish(Slot& s, const std::string& reason, const std::string& error) {
  ReplyDelta rest = s.text->finish();
  ReplyUpdate u;
  u.content = std::move(rest.content);
  u.reasoning = std::move(rest.reasoning);
  u.logprobs = std::move(s.logprobs);
  s.logprobs.clear();
  u.done = true;
  u.finish_reason = reason;
  u.error = error;
  u.prompt_tokens = static_cast<int64_t>(s.job->prompt.size());
  u.cached_tokens = s.reused;
  u.completion_tokens = s.generated;
  std::shared_ptr<UpdateChannel> channel = std::move(s.channel);
  s.job.reset();
  // Its rows stay for a later prompt to reuse, unless the pool needs the pages first.
  batch_->set_evictable(s.id, true);
  s.text.reset();
  {
    // Counted and published before the client hears of the end, so that what it asks next
    // (/metrics, /slots) already shows the job finished and its slot free.
    std::lock_guard lock(mutex_);
    ++metrics_.requests_total;
    publish_locked();
  }
  channel->push(std::move(u));
}

}  // namespace latte::server
