// The engine across the ranks of an MPI job (engine.h): every rank's engine thread takes turns in
// step with the others. A turn is rank 0's plan (broadcast), every rank's step (its own slots'
// tokens; the MoE layers meet the other ranks'), and every rank's report (gathered on rank 0).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <span>

#include "src/server/engine.h"
#include "src/server/engine_wire.h"

namespace latte::server {

using nlohmann::json;

namespace {

// The tokens a job holds and is to evaluate: what load it puts on its rank.
int64_t active_tokens(const SlotInfo& s) { return s.state == "idle" ? 0 : s.prompt_tokens + s.generated_tokens; }

}  // namespace

void Engine::run_across_ranks() {
  try {
    for (;;) {
      const std::string plan = job_->text_from_rank0(job_->rank() == 0 ? plan_turn() : std::string());
      const bool go_on = apply_plan(plan);
      {
        std::unique_lock lock(mutex_);
        if (cut_) cut_everything_locked(lock);  // every rank in the same turn
        if (go_on) admit_locked();
      }
      step();  // meets the other ranks' steps, with or without tokens of this rank's
      const std::vector<std::string> reports = job_->texts_to_rank0(report(), job_->timeout());
      if (job_->rank() == 0) take_reports(reports);
      {
        std::lock_guard lock(mutex_);
        publish_locked();
      }
      if (!go_on) return;
    }
  } catch (const std::exception& e) {
    // A rank died or hangs, or the ranks no longer agree: the job cannot serve on.
    std::fprintf(stderr, "%s\n", fmt::format("latte serve: error: rank {}: {}", job_->rank(), e.what()).c_str());
    job_->abort(1);
  }
}

std::string Engine::plan_turn() {
  std::unique_lock lock(mutex_);
  publish_locked();
  const auto local = std::span(published_).first(slots_.size());  // this rank's slots come first
  const bool busy = std::any_of(local.begin(), local.end(), [](const SlotInfo& s) { return s.state != "idle"; });
  const bool first = loads_.back().slots.empty();  // a turn at once, for the others' slots in /slots
  wake_.wait(lock, [&] { return first || stop_ || cut_ || !queue_.empty() || !given_away_.empty() || busy; });

  // Each queued job goes to a rank with an idle slot, the one with the fewest active tokens (rank 0
  // keeps its own in the queue, for admit_locked); a job no rank has a slot for waits.
  const int ranks = job_->size();
  std::vector<int> idle(static_cast<size_t>(ranks), 0);
  std::vector<int64_t> active(static_cast<size_t>(ranks), 0);
  for (const SlotInfo& s : local) {
    idle[0] += s.state == "idle";
    active[0] += active_tokens(s);
  }
  for (int r = 1; r < ranks; ++r) {
    idle[static_cast<size_t>(r)] = loads_[static_cast<size_t>(r)].idle_slots;
    active[static_cast<size_t>(r)] = loads_[static_cast<size_t>(r)].active_tokens;
  }
  json jobs = json::array();
  for (auto q = queue_.begin(); q != queue_.end();) {
    int best = -1;
    for (int r = 0; r < ranks; ++r)
      if (idle[static_cast<size_t>(r)] > 0 &&
          (best < 0 || active[static_cast<size_t>(r)] < active[static_cast<size_t>(best)]))
        best = r;
    if (best < 0) break;
    --idle[static_cast<size_t>(best)];
    active[static_cast<size_t>(best)] += static_cast<int64_t>(q->job.prompt.size());
    if (best == 0 || q->channel->cancelled()) {  // rank 0's, or dropped by admit_locked
      ++q;
      continue;
    }
    const uint64_t id = ++next_job_id_;
    jobs.push_back({best, id, to_wire(q->job)});
    given_away_[id] = std::move(q->channel);
    q = queue_.erase(q);
  }
  // A job whose client went away: its rank drops it, and nobody reads its channel any more.
  json cancels = json::array();
  for (auto it = given_away_.begin(); it != given_away_.end();) {
    if (!it->second->cancelled()) {
      ++it;
      continue;
    }
    cancels.push_back(it->first);
    ++metrics_.requests_total;
    ++metrics_.requests_cancelled;
    it = given_away_.erase(it);
  }
  metrics_.queued = static_cast<int>(queue_.size());
  return pack({{"stop", stop_}, {"cut", cut_}, {"jobs", jobs}, {"cancels", cancels}});
}

bool Engine::apply_plan(const std::string& plan) {
  const json p = unpack(plan);
  std::lock_guard lock(mutex_);
  try {
    const int me = job_->rank();
    for (const json& j : p.at("jobs")) {
      if (j.at(0).get<int>() != me) continue;
      auto channel = std::make_shared<UpdateChannel>();
      taken_[j.at(1).get<uint64_t>()] = channel;
      queue_.push_back({job_from_wire(j.at(2)), channel});
    }
    for (const json& id : p.at("cancels"))
      if (const auto it = taken_.find(id.get<uint64_t>()); it != taken_.end()) it->second->cancel();
    if (p.at("cut").get<bool>()) cut_ = true;
    if (p.at("stop").get<bool>()) draining_ = cut_ = stop_ = true;
    return !p.at("stop").get<bool>();
  } catch (const json::exception& e) {
    ggl::fail("rank 0's plan is malformed: {}", e.what());
  }
}

std::string Engine::report() {
  json updates = json::array();
  for (auto it = taken_.begin(); it != taken_.end();) {
    bool done = false;
    for (const ReplyUpdate& u : it->second->wait(std::chrono::milliseconds(0))) {
      done = done || u.done;
      updates.push_back({it->first, to_wire(u)});
    }
    it = done || it->second->cancelled() ? taken_.erase(it) : std::next(it);  // (a cancelled one: dropped)
  }
  std::lock_guard lock(mutex_);
  publish_locked();
  json slots = json::array();
  int idle = 0;
  int64_t active = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const SlotInfo& s = published_[i];  // this rank's own come first
    slots.push_back(to_wire(s));
    idle += s.state == "idle";
    active += active_tokens(s);
  }
  idle = std::max(0, idle - static_cast<int>(queue_.size()));  // queued here: slots already promised
  return pack({{"idle", idle}, {"active", active}, {"slots", slots}, {"updates", updates}});
}

void Engine::take_reports(const std::vector<std::string>& reports) {
  for (size_t r = 1; r < reports.size(); ++r) {
    const json j = unpack(reports[r]);
    RankLoad load;
    std::vector<std::pair<uint64_t, ReplyUpdate>> updates;
    try {
      load.idle_slots = j.at("idle").get<int>();
      load.active_tokens = j.at("active").get<int64_t>();
      for (const json& s : j.at("slots")) load.slots.push_back(slot_from_wire(s));
      for (const json& u : j.at("updates")) updates.emplace_back(u.at(0).get<uint64_t>(), update_from_wire(u.at(1)));
    } catch (const json::exception& e) {
      ggl::fail("rank {}'s report is malformed: {}", r, e.what());
    }
    std::lock_guard lock(mutex_);
    loads_[r] = std::move(load);
    for (auto& [id, update] : updates) {
      const auto it = given_away_.find(id);
      if (it == given_away_.end()) continue;  // cancelled meanwhile
      if (update.done) {
        ++metrics_.requests_total;
        metrics_.prompt_tokens_total += static_cast<uint64_t>(update.prompt_tokens);
        metrics_.prompt_tokens_cached_total += static_cast<uint64_t>(update.cached_tokens);
        metrics_.generated_tokens_total += static_cast<uint64_t>(update.completion_tokens);
      }
      const bool done = update.done;
      it->second->push(std::move(update));
      if (done) given_away_.erase(it);
    }
  }
}

}  // namespace latte::server
