// latte serve's completions and chat completions against the real binary and the shipped tiny
// model: whole and streamed replies agree, greedy replies equal `latte run`'s, concurrent requests
// batched together get the replies they get alone, and stop strings end a reply before them.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "tests/src/server/server_process.h"

namespace latte::testing::test_server_completions {

using nlohmann::json;

std::string completion_body(const std::string& prompt, int max_tokens, json extra = json::object()) {
  json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
  body.update(extra);
  return body.dump();
}

std::string chat_body(const std::string& text, int max_tokens, json extra = json::object()) {
  json body = {{"messages", {{{"role", "user"}, {"content", text}}}}, {"max_tokens", max_tokens}, {"temperature", 0}};
  body.update(extra);
  return body.dump();
}

// The text of a whole /v1/completions reply ("" and a failure when it is not one).
std::string completion_text(const HttpReply& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  const json j = r.json();
  if (!j.contains("choices")) return "";
  return j["choices"][0]["text"].get<std::string>();
}

class ServerCompletions : public SharedServerSuite<ServerCompletions> {
 public:
  static std::vector<std::string> server_flags() { return {"--parallel", "4"}; }
};

TEST_F(ServerCompletions, GreedyCompletionEqualsLatteRun) {
  httplib::Client c = server_->client();
  const HttpReply r = http_post(c, "/v1/completions", completion_body("Once upon a time", 16));
  const json j = r.json();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);  // BOS and the 4 words, as `latte tokenize --bos` shows
  EXPECT_EQ(j["usage"]["completion_tokens"], 16);
  EXPECT_EQ(j["usage"]["total_tokens"], 21);
  EXPECT_EQ(j["model"], "tiny-mla-stories-f32.gguf");
  const CommandResult run = run_latte("run -p 'Once upon a time' -n 16 --temp 0", /*merge_stderr=*/false);
  ASSERT_EQ(run.exit_code, 0);
  EXPECT_EQ(completion_text(r) + "\n", run.out);  // run ends its output with a newline
}

TEST_F(ServerCompletions, StreamedCompletionEqualsTheWholeOne) {
  httplib::Client c = server_->client();
  const std::string whole = completion_text(http_post(c, "/v1/completions", completion_body("The dog", 12)));
  const EventStreamReply s = post_event_stream(
      c, "/v1/completions",
      completion_body("The dog", 12, {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_EQ(s.status, 200) << s.raw;
  EXPECT_TRUE(s.done) << s.raw;
  ASSERT_GE(s.events.size(), 3u) << s.raw;
  std::string text;
  for (const json& e : s.events) {
    EXPECT_EQ(e["object"], "text_completion");
    if (!e["choices"].empty()) text += e["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, whole);
  const json& finish = s.events[s.events.size() - 2];
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "length");
  const json& usage = s.events.back();  // include_usage: a last chunk without choices
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 12);
  EXPECT_EQ(usage["usage"]["total_tokens"], usage["usage"]["prompt_tokens"].get<int>() + 12);
}

TEST_F(ServerCompletions, StreamedChatHasRoleDeltasAndFinish) {
  httplib::Client c = server_->client();
  const HttpReply whole = http_post(c, "/v1/chat/completions", chat_body("Tell me a story", 10));
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json w = whole.json();
  EXPECT_EQ(w["object"], "chat.completion");
  EXPECT_EQ(w["choices"][0]["message"]["role"], "assistant");
  const std::string content = w["choices"][0]["message"]["content"];
  EXPECT_FALSE(content.empty());

  const EventStreamReply s =
      post_event_stream(c, "/v1/chat/completions", chat_body("Tell me a story", 10, {{"stream", true}}));
  ASSERT_TRUE(s.done) << s.raw;
  ASSERT_GE(s.events.size(), 3u);
  EXPECT_EQ(s.events.front()["choices"][0]["delta"]["role"], "assistant");
  std::string streamed;
  for (const json& e : s.events) {
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    EXPECT_EQ(e["id"], s.events.front()["id"]);
    streamed += e["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(streamed, content);
  EXPECT_EQ(s.events.back()["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(s.events.back().contains("usage"));  // not asked for
}

TEST_F(ServerCompletions, ConcurrentRequestsGetTheirAloneReplies) {
  const std::vector<std::string> prompts = {"Once upon a time", "The cat",     "Lily saw a",
                                            "One day, Tom",     "The sun was", "A little bird"};
  std::vector<std::string> alone;
  {
    httplib::Client c = server_->client();
    for (const std::string& p : prompts)
      alone.push_back(completion_text(http_post(c, "/v1/completions", completion_body(p, 12))));
  }
  // Six clients at once on four slots: batched together, two of them queued at first.
  std::vector<HttpReply> together(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i)
    clients.emplace_back([&, i] {
      httplib::Client c = server_->client();
      together[i] = http_post(c, "/v1/completions", completion_body(prompts[i], 12));
    });
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(completion_text(together[i]), alone[i]) << prompts[i];
}

TEST_F(ServerCompletions, StopStringEndsTheReplyBeforeIt) {
  httplib::Client c = server_->client();
  const std::string full = completion_text(http_post(c, "/v1/completions", completion_body("Once upon a time", 16)));
  const size_t at = full.find(" girl");
  ASSERT_NE(at, std::string::npos) << full;
  const HttpReply r =
      http_post(c, "/v1/completions", completion_body("Once upon a time", 16, {{"stop", {"xyz", " girl"}}}));
  EXPECT_EQ(completion_text(r), full.substr(0, at));
  EXPECT_EQ(r.json()["choices"][0]["finish_reason"], "stop");
  // Streamed, no piece of the stop string leaks out either.
  const EventStreamReply s = post_event_stream(
      c, "/v1/completions", completion_body("Once upon a time", 16, {{"stop", " girl"}, {"stream", true}}));
  std::string text;
  for (const json& e : s.events) text += e["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, full.substr(0, at));
}

TEST_F(ServerCompletions, SeededSamplingRepeats) {
  httplib::Client c = server_->client();
  const json sampled = {{"temperature", 1.0}, {"seed", 1234}, {"top_k", 0}, {"top_p", 1.0}, {"min_p", 0}};
  const std::string a =
      completion_text(http_post(c, "/v1/completions", completion_body("Once upon a time", 12, sampled)));
  const std::string b =
      completion_text(http_post(c, "/v1/completions", completion_body("Once upon a time", 12, sampled)));
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a.empty());
}

}  // namespace latte::testing::test_server_completions
