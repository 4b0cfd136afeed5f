#include "src/server/completion_request.h"

#include <cmath>
#include <limits>

#include "src/server/api_error.h"
#include "src/server/token_logprobs.h"

namespace latte::server {
namespace {

using nlohmann::json;

const char* json_kind(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

// The field's value when present and not null (OpenAI clients send null for "unset").
const json* request_field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number_field(const json& v, const char* name) {
  if (!v.is_number()) bad_request("'{}' must be a number, not {}", name, json_kind(v));
  return v.get<double>();
}

int64_t integer_field(const json& v, const char* name) {
  if (v.is_number_integer()) return v.get<int64_t>();
  // 5.0 is accepted as 5 (JSON has one number type); 5.5 is not.
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::trunc(d) == d && std::abs(d) < 9.0e15) return static_cast<int64_t>(d);
  }
  bad_request("'{}' must be an integer, not {}", name, v.is_number() ? v.dump() : json_kind(v));
}

bool bool_field(const json& v, const char* name) {
  if (!v.is_boolean()) bad_request("'{}' must be true or false, not {}", name, json_kind(v));
  return v.get<bool>();
}

// A message's content: a string, or OpenAI's array of parts of which only text parts are read.
std::string message_content(const json& v, size_t i) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) bad_request("messages[{}].content must be a string or an array of parts, not {}", i, json_kind(v));
  std::string text;
  for (const json& part : v) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      bad_request("messages[{}].content: only parts {{\"type\": \"text\", \"text\": \"...\"}} are supported", i);
    text += part["text"].get<std::string>();
  }
  return text;
}

std::vector<ChatMessage> parse_messages(const json& body) {
  const json* v = request_field(body, "messages");
  if (!v) bad_request("'messages' is required");
  if (!v->is_array()) bad_request("'messages' must be an array, not {}", json_kind(*v));
  if (v->empty()) bad_request("'messages' must not be empty");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    if (!m.is_object()) bad_request("messages[{}] must be an object, not {}", i, json_kind(m));
    const json* role = request_field(m, "role");
    if (!role || !role->is_string()) bad_request("messages[{}].role must be a string", i);
    std::string name = role->get<std::string>();
    if (name == "developer") name = "system";  // OpenAI's newer name for the system role
    const std::optional<Role> r = parse_role(name);
    if (!r) bad_request("messages[{}].role '{}' is not supported (system, developer, user, assistant)", i, name);
    out.push_back({*r, message_content(m.contains("content") ? m["content"] : json(), i)});
  }
  return out;
}

void parse_prompt(const json& body, CompletionRequest& r) {
  const json* v = request_field(body, "prompt");
  if (!v) bad_request("'prompt' is required");
  if (v->is_string()) {
    r.prompt = v->get<std::string>();
    return;
  }
  if (!v->is_array()) bad_request("'prompt' must be a string or an array, not {}", json_kind(*v));
  if (v->size() == 1 && (*v)[0].is_string()) {
    r.prompt = (*v)[0].get<std::string>();
    return;
  }
  if (!v->empty() && std::all_of(v->begin(), v->end(), [](const json& t) { return t.is_number_integer(); })) {
    std::vector<int32_t> ids;
    for (const json& t : *v) {
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id > std::numeric_limits<int32_t>::max()) bad_request("'prompt': token id {} is out of range", id);
      ids.push_back(static_cast<int32_t>(id));
    }
    r.prompt_ids = std::move(ids);
    return;
  }
  bad_request(
      "'prompt' must be a string, one string in an array, or an array of token ids (several prompts "
      "in one request are not supported)");
}

std::vector<std::string> parse_stop(const json& v) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    for (const json& s : v) {
      if (!s.is_string()) bad_request("'stop' must be a string or an array of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    bad_request("'stop' must be a string or an array of strings, not {}", json_kind(v));
  }
  if (out.size() > 16) bad_request("'stop' has {} strings; at most 16 are allowed", out.size());
  for (const std::string& s : out)
    if (s.empty()) bad_request("'stop' strings must not be empty");
  return out;
}

void parse_sampling(const json& body, CompletionRequest& r) {
  SamplingParams& s = r.sampling;
  if (const json* v = request_field(body, "temperature")) {
    const double t = number_field(*v, "temperature");
    if (t < 0) bad_request("'temperature' must be >= 0 (got {})", v->dump());
    s.temp = static_cast<float>(t);
  }
  if (const json* v = request_field(body, "top_p")) {
    const double p = number_field(*v, "top_p");
    if (!(p > 0 && p <= 1)) bad_request("'top_p' must be in (0, 1] (got {})", v->dump());
    s.top_p = static_cast<float>(p);
  }
  if (const json* v = request_field(body, "min_p")) {
    const double p = number_field(*v, "min_p");
    if (!(p >= 0 && p <= 1)) bad_request("'min_p' must be in [0, 1] (got {})", v->dump());
    s.min_p = static_cast<float>(p);
  }
  if (const json* v = request_field(body, "top_k")) {
    const int64_t k = integer_field(*v, "top_k");
    if (k < 0 || k > std::numeric_limits<int32_t>::max()) bad_request("'top_k' must be >= 0 (got {})", k);
    s.top_k = static_cast<int32_t>(k);
  }
  if (const json* v = request_field(body, "repeat_penalty")) {
    const double p = number_field(*v, "repeat_penalty");
    if (!(p > 0)) bad_request("'repeat_penalty' must be > 0 (got {})", v->dump());
    s.repeat_penalty = static_cast<float>(p);
  }
  if (const json* v = request_field(body, "seed")) {
    const int64_t seed = integer_field(*v, "seed");
    if (seed < -1) bad_request("'seed' must be >= 0, or -1 for a random one (got {})", seed);
    s.seed = seed;
  }
  for (auto [name, target] :
       {std::pair{"presence_penalty", &r.presence_penalty}, std::pair{"frequency_penalty", &r.frequency_penalty}}) {
    if (const json* v = request_field(body, name)) {
      const double p = number_field(*v, name);
      if (!(p >= -2 && p <= 2)) bad_request("'{}' must be in [-2, 2] (got {})", name, v->dump());
      *target = static_cast<float>(p);
    }
  }
}

int64_t top_count(const json& v, const char* name) {
  const int64_t n = integer_field(v, name);
  if (n < 0 || n > kMaxTopLogprobs) bad_request("'{}' must be in [0, {}] (got {})", name, kMaxTopLogprobs, n);
  return n;
}

// OpenAI's shapes: chat takes "logprobs": true and "top_logprobs": N; completions "logprobs": N.
void parse_logprobs(const json& body, CompletionRequest& r) {
  const json* logprobs = request_field(body, "logprobs");
  if (r.endpoint == Endpoint::kCompletions) {
    if (logprobs) r.logprobs = static_cast<int>(top_count(*logprobs, "logprobs"));
    return;
  }
  const bool wanted = logprobs && bool_field(*logprobs, "logprobs");
  const json* top = request_field(body, "top_logprobs");
  if (top && !wanted) bad_request("'top_logprobs' needs 'logprobs': true");
  if (wanted) r.logprobs = top ? static_cast<int>(top_count(*top, "top_logprobs")) : 0;
}

}  // namespace

nlohmann::json parse_json_object(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad_request("the request body is not valid JSON");
  if (!j.is_object()) bad_request("the request body must be a JSON object, not {}", json_kind(j));
  return j;
}

CompletionRequest parse_completion_request(const std::string& body, Endpoint endpoint, const SamplingParams& defaults) {
  const json j = parse_json_object(body);
  CompletionRequest r;
  r.endpoint = endpoint;
  r.sampling = defaults;
  if (endpoint == Endpoint::kChatCompletions)
    r.messages = parse_messages(j);
  else
    parse_prompt(j, r);
  parse_sampling(j, r);

  // max_completion_tokens is OpenAI's newer name; it wins when both are given.
  for (const char* name : {"max_tokens", "max_completion_tokens", "n_predict"}) {
    if (const json* v = request_field(j, name)) {
      const int64_t n = integer_field(*v, name);
      if (n < 1 && !(n == -1 && std::string_view(name) == "n_predict"))
        bad_request("'{}' must be >= 1 (got {})", name, n);
      if (std::string_view(name) != "n_predict" || r.max_tokens < 0) r.max_tokens = n;
    }
  }
  if (const json* v = request_field(j, "n")) {
    const int64_t n = integer_field(*v, "n");
    if (n != 1) bad_request("'n' = {} is not supported: this server returns one choice per request (n = 1)", n);
  }
  parse_logprobs(j, r);
  if (const json* v = request_field(j, "stop")) r.stop = parse_stop(*v);
  if (const json* v = request_field(j, "stream")) r.stream = bool_field(*v, "stream");
  if (const json* v = request_field(j, "ignore_eos")) r.ignore_eos = bool_field(*v, "ignore_eos");
  if (const json* v = request_field(j, "cache_prompt")) r.cache_prompt = bool_field(*v, "cache_prompt");
  if (const json* v = request_field(j, "stream_options")) {
    if (!v->is_object()) bad_request("'stream_options' must be an object, not {}", json_kind(*v));
    if (const json* u = request_field(*v, "include_usage"))
      r.include_usage = bool_field(*u, "stream_options.include_usage");
  }
  if (const json* v = request_field(j, "model")) {
    if (!v->is_string()) bad_request("'model' must be a string, not {}", json_kind(*v));
    r.model = v->get<std::string>();
  }
  return r;
}

}  // namespace latte::server
