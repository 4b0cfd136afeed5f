#include "src/server/engine_wire.h"

#include "ggml-like/core/error.h"

namespace latte {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SamplingParams, temp, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed)

namespace server {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(EngineJob, prompt, sampling, presence_penalty, frequency_penalty, max_tokens, stop,
                                   ignore_eos, chat, starts_thinking, cache_prompt, logprobs)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TokenLogprob, token, logprob, text_offset, top)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ReplyUpdate, content, reasoning, logprobs, done, finish_reason, error, prompt_tokens,
                                   cached_tokens, completion_tokens)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SlotInfo, id, state, n_past, n_ctx, prompt_tokens, generated_tokens, cached_tokens)

using nlohmann::json;

namespace {

// j as a T; throws ggl::Error naming `what` when a field is missing or of another type.
template <class T>
T from_wire(const json& j, const char* what) {
  try {
    return j.get<T>();
  } catch (const json::exception& e) {
    ggl::fail("{} is malformed: {}", what, e.what());
  }
}

}  // namespace

json to_wire(const EngineJob& job) { return job; }
json to_wire(const ReplyUpdate& update) { return update; }
json to_wire(const SlotInfo& slot) { return slot; }

EngineJob job_from_wire(const json& j) { return from_wire<EngineJob>(j, "a job from rank 0"); }
ReplyUpdate update_from_wire(const json& j) { return from_wire<ReplyUpdate>(j, "a reply update from a rank"); }
SlotInfo slot_from_wire(const json& j) { return from_wire<SlotInfo>(j, "a slot's state from a rank"); }

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

}  // namespace server
}  // namespace latte
