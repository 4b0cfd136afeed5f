#include "src/server/engine_wire.h"

#include "ggml-like/core/error.h"

namespace latte::server {

using nlohmann::json;

json to_wire(const EngineJob& job) {
  const SamplingParams& s = job.sampling;
  return {{"prompt", job.prompt},
          {"sampling", {s.temp, s.top_k, s.top_p, s.min_p, s.repeat_penalty, s.repeat_last_n, s.seed}},
          {"presence_penalty", job.presence_penalty},
          {"frequency_penalty", job.frequency_penalty},
          {"max_tokens", job.max_tokens},
          {"stop", job.stop},
          {"ignore_eos", job.ignore_eos},
          {"chat", job.chat},
          {"starts_thinking", job.starts_thinking},
          {"cache_prompt", job.cache_prompt},
          {"logprobs", job.logprobs}};
}

EngineJob job_from_wire(const json& j) {
  try {
    EngineJob job;
    j.at("prompt").get_to(job.prompt);
    const json& s = j.at("sampling");
    SamplingParams& p = job.sampling;
    s.at(0).get_to(p.temp);
    s.at(1).get_to(p.top_k);
    s.at(2).get_to(p.top_p);
    s.at(3).get_to(p.min_p);
    s.at(4).get_to(p.repeat_penalty);
    s.at(5).get_to(p.repeat_last_n);
    s.at(6).get_to(p.seed);
    j.at("presence_penalty").get_to(job.presence_penalty);
    j.at("frequency_penalty").get_to(job.frequency_penalty);
    j.at("max_tokens").get_to(job.max_tokens);
    j.at("stop").get_to(job.stop);
    j.at("ignore_eos").get_to(job.ignore_eos);
    j.at("chat").get_to(job.chat);
    j.at("starts_thinking").get_to(job.starts_thinking);
    j.at("cache_prompt").get_to(job.cache_prompt);
    j.at("logprobs").get_to(job.logprobs);
    return job;
  } catch (const json::exception& e) {
    ggl::fail("a job from rank 0 is malformed: {}", e.what());
  }
}

json to_wire(const ReplyUpdate& u) {
  json logprobs = json::array();
  for (const TokenLogprob& lp : u.logprobs) logprobs.push_back({lp.token, lp.logprob, lp.text_offset, lp.top});
  return {{"content", u.content},
          {"reasoning", u.reasoning},
          {"logprobs", logprobs},
          {"done", u.done},
          {"finish_reason", u.finish_reason},
          {"error", u.error},
          {"tokens", {u.prompt_tokens, u.cached_tokens, u.completion_tokens}}};
}

ReplyUpdate update_from_wire(const json& j) {
  try {
    ReplyUpdate u;
    j.at("content").get_to(u.content);
    j.at("reasoning").get_to(u.reasoning);
    for (const json& lp : j.at("logprobs")) {
      TokenLogprob& t = u.logprobs.emplace_back();
      lp.at(0).get_to(t.token);
      lp.at(1).get_to(t.logprob);
      lp.at(2).get_to(t.text_offset);
      lp.at(3).get_to(t.top);
    }
    j.at("done").get_to(u.done);
    j.at("finish_reason").get_to(u.finish_reason);
    j.at("error").get_to(u.error);
    const json& n = j.at("tokens");
    n.at(0).get_to(u.prompt_tokens);
    n.at(1).get_to(u.cached_tokens);
    n.at(2).get_to(u.completion_tokens);
    return u;
  } catch (const json::exception& e) {
    ggl::fail("a reply update from a rank is malformed: {}", e.what());
  }
}

json to_wire(const SlotInfo& s) {
  return {s.id, s.state, s.n_past, s.n_ctx, s.prompt_tokens, s.generated_tokens, s.cached_tokens};
}

SlotInfo slot_from_wire(const json& j) {
  try {
    SlotInfo s;
    j.at(0).get_to(s.id);
    j.at(1).get_to(s.state);
    j.at(2).get_to(s.n_past);
    j.at(3).get_to(s.n_ctx);
    j.at(4).get_to(s.prompt_tokens);
    j.at(5).get_to(s.generated_tokens);
    j.at(6).get_to(s.cached_tokens);
    return s;
  } catch (const json::exception& e) {
    ggl::fail("a slot's state from a rank is malformed: {}", e.what());
  }
}

std::string pack(const json& j) {
  const std::vector<uint8_t> bytes = json::to_msgpack(j);
  return {bytes.begin(), bytes.end()};
}

json unpack(const std::string& bytes) {
  try {
    return json::from_msgpack(bytes);
  } catch (const json::exception& e) {
    ggl::fail("a message between the ranks is malformed: {}", e.what());
  }
}

}  // namespace latte::server
