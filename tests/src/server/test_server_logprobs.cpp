// latte serve's logprobs / top_logprobs in OpenAI's shapes: chat's logprobs.content[] and
// completions' tokens / token_logprobs / top_logprobs / text_offset, whole and streamed. The values
// are the softmax of the raw logits: under greedy sampling the chosen token is the top one, and
// they equal a direct computation from a Session's logits over the same tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "src/model/model.h"
#include "src/runtime/session.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/src/server/server_process.h"

namespace latte::testing::test_server_logprobs {

using nlohmann::json;

class ServerLogprobs : public SharedServerSuite<ServerLogprobs> {
 public:
  static std::vector<std::string> server_flags() { return {"--parallel", "2"}; }
};

json post_ok(httplib::Client& c, const std::string& path, const json& body) {
  const HttpReply r = http_post(c, path, body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return r.json();
}

// How far a logprob from the server may be from a Session's over the same tokens: their graphs
// chunk the prompt differently, which moves F32 logits in the last bits (about 1e-4 here in the
// log-probabilities); every deliberate break tried is off by more than 0.4.
constexpr double kTolerance = 1e-3;

std::vector<int> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

TEST_F(ServerLogprobs, ChatLogprobsHaveOpenAIsShapeAndTheGreedyTokenIsTheTopOne) {
  httplib::Client c = server_->client();
  const json j = post_ok(c, "/v1/chat/completions",
                         {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
                          {"max_tokens", 8},
                          {"temperature", 0},
                          {"ignore_eos", true},
                          {"logprobs", true},
                          {"top_logprobs", 3}});
  const json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 8u) << j.dump();
  std::string joined;
  for (const json& t : content) {
    const std::string token = t["token"];
    joined += token;
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
    EXPECT_EQ(t["bytes"].get<std::vector<int>>(), bytes_of(token));
    const json& top = t["top_logprobs"];
    ASSERT_EQ(top.size(), 3u);
    EXPECT_EQ(top[0]["token"], token);  // greedy: the chosen token is the most likely one
    EXPECT_EQ(top[0]["logprob"], t["logprob"]);
    for (size_t i = 1; i < top.size(); ++i) EXPECT_LE(top[i]["logprob"].get<double>(), top[i - 1]["logprob"]);
  }
  // The reply is the tokens' text, but for the whitespace a chat reply's start is trimmed of.
  const std::string reply = j["choices"][0]["message"]["content"];
  EXPECT_EQ(joined.substr(joined.find_first_not_of(' ')), reply);

  // top_logprobs 0: each token's own logprob only; no logprobs asked: null.
  const json none = post_ok(c, "/v1/chat/completions",
                            {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                             {"max_tokens", 2},
                             {"logprobs", true},
                             {"top_logprobs", 0}});
  for (const json& t : none["choices"][0]["logprobs"]["content"]) EXPECT_TRUE(t["top_logprobs"].empty());
  const json plain =
      post_ok(c, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}});
  EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null());
}

TEST_F(ServerLogprobs, CompletionLogprobsEqualTheModelsSoftmax) {
  httplib::Client c = server_->client();
  const std::string prompt = "Once upon a time";
  const json j =
      post_ok(c, "/v1/completions",
              {{"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true}, {"logprobs", 2}});
  const json& lp = j["choices"][0]["logprobs"];
  const auto tokens = lp["tokens"].get<std::vector<std::string>>();
  ASSERT_EQ(tokens.size(), 6u) << j.dump();
  ASSERT_EQ(lp["token_logprobs"].size(), 6u);
  ASSERT_EQ(lp["top_logprobs"].size(), 6u);
  ASSERT_EQ(lp["text_offset"].size(), 6u);
  std::string joined;
  for (size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_EQ(lp["text_offset"][i], joined.size());
    joined += tokens[i];
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
    // Greedy: the chosen token's logprob is the largest of its position's top ones.
    double best = -INFINITY;
    for (const auto& [text, value] : lp["top_logprobs"][i].items()) best = std::max(best, value.get<double>());
    EXPECT_EQ(best, lp["token_logprobs"][i].get<double>());
    EXPECT_EQ(lp["top_logprobs"][i][tokens[i]], lp["token_logprobs"][i]);
  }
  EXPECT_EQ(joined, j["choices"][0]["text"]);

  // The sampling settings change which token is drawn, not the distribution reported: the first
  // token's top logprobs are the greedy request's (within the last bits: the prompt is reused).
  const json sampled = post_ok(c, "/v1/completions",
                               {{"prompt", prompt},
                                {"max_tokens", 1},
                                {"temperature", 1.5},
                                {"seed", 7},
                                {"top_k", 5},
                                {"repeat_penalty", 1.5},
                                {"logprobs", 2}});
  const json& first_top = sampled["choices"][0]["logprobs"]["top_logprobs"][0];
  ASSERT_EQ(first_top.size(), lp["top_logprobs"][0].size()) << sampled.dump();
  for (const auto& [text, value] : lp["top_logprobs"][0].items()) {
    ASSERT_TRUE(first_top.contains(text)) << sampled.dump();
    EXPECT_NEAR(first_top[text].get<double>(), value.get<double>(), kTolerance) << text;
  }

  // The same from the model directly: log softmax of a Session's logits, token after token.
  const json ids = post_ok(c, "/tokenize", {{"content", prompt}, {"add_special", true}})["tokens"];
  std::vector<int32_t> context = ids.get<std::vector<int32_t>>();
  const Model model((latte_binary().parent_path() / "../../models/tiny-mla-stories-f32.gguf").string());
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_gguf(model.file());
  Session session(model, {});
  std::vector<float> logits = session.eval(context, Logits::kLast);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const float max = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
    const auto chosen = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    const double expected = logits[static_cast<size_t>(chosen)] - max - std::log(sum);
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), expected, kTolerance) << "token " << i;
    EXPECT_EQ(tokens[i], tokenizer->token_to_piece(chosen)) << "token " << i << ": not the model's most likely one";
    logits = session.eval(std::vector<int32_t>{chosen}, Logits::kLast);
  }
}

// With penalties the engine changes the logits before sampling; the reported logprobs are still
// the model's own: each token's equals the log softmax of a Session's logits over the same tokens.
TEST_F(ServerLogprobs, PenalizedRepliesReportTheModelsDistribution) {
  httplib::Client c = server_->client();
  const std::string prompt = "The little dog";
  const json j = post_ok(c, "/v1/completions",
                         {{"prompt", prompt},
                          {"max_tokens", 10},
                          {"temperature", 0},
                          {"ignore_eos", true},
                          {"presence_penalty", 2},
                          {"frequency_penalty", 2},
                          {"logprobs", 1}});
  const json& lp = j["choices"][0]["logprobs"];
  const Model model((latte_binary().parent_path() / "../../models/tiny-mla-stories-f32.gguf").string());
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_gguf(model.file());
  // The ids a reply token's text may stand for (a byte token and a character token may share one).
  std::map<std::string, std::vector<int32_t>> ids_of;
  for (int32_t id = 0; id < tokenizer->n_vocab(); ++id) ids_of[tokenizer->token_to_piece(id)].push_back(id);
  Session session(model, {});
  std::vector<float> logits = session.eval(
      post_ok(c, "/tokenize", {{"content", prompt}, {"add_special", true}})["tokens"].get<std::vector<int32_t>>(),
      Logits::kLast);
  ASSERT_EQ(lp["tokens"].size(), 10u) << j.dump();
  for (size_t i = 0; i < lp["tokens"].size(); ++i) {
    const float max = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
    // The id whose log softmax is nearest the reported value: the one the server chose.
    const double reported = lp["token_logprobs"][i].get<double>();
    int32_t id = -1;
    double error = INFINITY;
    for (int32_t candidate : ids_of.at(lp["tokens"][i].get<std::string>())) {
      const double e = std::abs(logits[static_cast<size_t>(candidate)] - max - std::log(sum) - reported);
      if (e < error) error = e, id = candidate;
    }
    EXPECT_LT(error, kTolerance) << "token " << i << " '" << lp["tokens"][i] << "'";
    logits = session.eval(std::vector<int32_t>{id}, Logits::kLast);
  }
}

TEST_F(ServerLogprobs, StreamedLogprobsEqualTheWholeReplys) {
  httplib::Client c = server_->client();
  const json body = {{"messages", {{{"role", "user"}, {"content", "The dog"}}}},
                     {"max_tokens", 6},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"logprobs", true},
                     {"top_logprobs", 2}};
  const json whole = post_ok(c, "/v1/chat/completions", body)["choices"][0]["logprobs"]["content"];
  json streamed_body = body;
  streamed_body["stream"] = true;
  const EventStreamReply s = post_event_stream(c, "/v1/chat/completions", streamed_body.dump());
  ASSERT_TRUE(s.done) << s.raw;
  json streamed = json::array();
  for (const json& e : s.events) {
    const json& logprobs = e["choices"][0]["logprobs"];
    if (!logprobs.is_null())
      for (const json& t : logprobs["content"]) streamed.push_back(t);
  }
  ASSERT_EQ(streamed.size(), whole.size()) << s.raw;
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(streamed[i]["token"], whole[i]["token"]);
    // The second request reuses the first's cached prompt, so its logits may differ in the last bits.
    EXPECT_NEAR(streamed[i]["logprob"].get<double>(), whole[i]["logprob"].get<double>(), kTolerance);
  }
}

TEST_F(ServerLogprobs, OutOfRangeRequestsAre400) {
  httplib::Client c = server_->client();
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};
  for (const json& extra :
       {json{{"logprobs", true}, {"top_logprobs", 21}}, json{{"logprobs", true}, {"top_logprobs", -1}},
        json{{"logprobs", true}, {"top_logprobs", "3"}}, json{{"top_logprobs", 2}}, json{{"logprobs", 3}}}) {
    json body = chat;
    body.update(extra);
    const HttpReply r = http_post(c, "/v1/chat/completions", body.dump());
    EXPECT_EQ(r.status, 400) << extra.dump() << " " << r.body;
  }
  for (const json& logprobs : {json(21), json(-1), json(true)}) {
    const HttpReply r =
        http_post(c, "/v1/completions", json({{"prompt", "Hi"}, {"max_tokens", 2}, {"logprobs", logprobs}}).dump());
    EXPECT_EQ(r.status, 400) << logprobs.dump() << " " << r.body;
  }
}

}  // namespace latte::testing::test_server_logprobs
