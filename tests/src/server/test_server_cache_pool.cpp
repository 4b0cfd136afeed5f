// latte serve over the slots' shared pool of cache pages (BatchSession, docs/server.md): a finished
// conversation's whole pages stay cached after its slot has gone to other prompts, so its next
// turn maps them instead of evaluating them; and a pool smaller than the slots' contexts
// (--cache-mem) refuses a prompt it cannot hold with 400, ends a reply it has no page for with
// finish_reason "length", and keeps serving. The servers run --deterministic, so a reply built on
// reused pages must equal the same prompt evaluated afresh.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "tests/src/server/server_process.h"

namespace latte::testing::test_server_cache_pool {

using nlohmann::json;

std::string completion_body(const std::string& prompt, int max_tokens, json extra = json::object()) {
  json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
  body.update(extra);
  return body.dump();
}

int64_t cached_tokens(const json& reply) { return reply["usage"]["prompt_tokens_details"]["cached_tokens"]; }

// About 70 tokens of the tiny model: two whole 32-token pages.
const std::string kStory =
    "Once upon a time, there was a little boy named Tom. He loved to play outside in the park with his friends. "
    "One day, he saw a big red ball under a tree. He ran to the ball and picked it up.";

class ServerCachePool : public SharedServerSuite<ServerCachePool> {
 public:
  static std::vector<std::string> server_flags() { return {"--parallel", "2", "--deterministic"}; }
};

TEST_F(ServerCachePool, AConversationsPagesOutliveItsSlot) {
  httplib::Client c = server_->client();
  const HttpReply first = http_post(c, "/v1/completions", completion_body(kStory + " Then it rained.", 4));
  ASSERT_EQ(first.status, 200) << first.body;
  // Two other prompts take both slots (the least recently used first), so no slot holds the story.
  for (const char* other : {"A cat sat on the mat and looked at the sky.", "The dog ran fast to the big tree."}) {
    const HttpReply r = http_post(c, "/v1/completions", completion_body(other, 2));
    ASSERT_EQ(r.status, 200) << r.body;
  }
  const double reused_before = metric_value(http_get(c, "/metrics").body, "latte_cache_pages_reused_total");

  const std::string next_turn = kStory + " The sun was hot.";
  const HttpReply again = http_post(c, "/v1/completions", completion_body(next_turn, 12));
  ASSERT_EQ(again.status, 200) << again.body;
  const json a = again.json();
  const double page = metric_value(http_get(c, "/metrics").body, "latte_cache_page_tokens");
  EXPECT_EQ(cached_tokens(a), 2 * static_cast<int64_t>(page)) << again.body;
  EXPECT_EQ(metric_value(http_get(c, "/metrics").body, "latte_cache_pages_reused_total"), reused_before + 2);

  const HttpReply fresh = http_post(c, "/v1/completions", completion_body(next_turn, 12, {{"cache_prompt", false}}));
  ASSERT_EQ(fresh.status, 200) << fresh.body;
  EXPECT_EQ(cached_tokens(fresh.json()), 0);
  EXPECT_EQ(a["choices"][0]["text"], fresh.json()["choices"][0]["text"]);
}

// A pool of three 32-token pages for two slots of 256 tokens.
class ServerSmallCachePool : public SharedServerSuite<ServerSmallCachePool> {
 public:
  static std::vector<std::string> server_flags() {
    return {"--parallel", "2", "--deterministic", "--cache-mem", std::to_string(96 * 5760)};
  }
};

TEST_F(ServerSmallCachePool, APromptLargerThanThePoolIsABadRequest) {
  httplib::Client c = server_->client();
  const HttpReply r = http_post(c, "/v1/completions", completion_body(kStory + " " + kStory, 4));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("cache pool"), std::string::npos) << r.body;
  EXPECT_EQ(http_get(c, "/health").status, 200);
}

TEST_F(ServerSmallCachePool, RepliesEndWhenThePoolIsFullAndTheServerGoesOn) {
  httplib::Client c = server_->client();
  const double full_before = metric_value(http_get(c, "/metrics").body, "latte_cache_full_total");
  // Alone, a reply that ignores end-of-text fills the pool's 96 rows and ends there: the token
  // sampled last needs no row, so prompt and reply count 97 tokens.
  const HttpReply alone = http_post(c, "/v1/completions", completion_body(kStory, 200, {{"ignore_eos", true}}));
  ASSERT_EQ(alone.status, 200) << alone.body;
  const json a = alone.json();
  EXPECT_EQ(a["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(a["usage"]["prompt_tokens"].get<int64_t>() + a["usage"]["completion_tokens"].get<int64_t>(), 97)
      << alone.body;

  // Two at once share the pool: both end, neither fails, neither holds more rows than the pool.
  std::vector<HttpReply> replies(2);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < replies.size(); ++i)
    clients.emplace_back([&, i] {
      httplib::Client ci = server_->client();
      replies[i] = http_post(
          ci, "/v1/completions",
          completion_body(i == 0 ? "The dog ran fast." : "A cat sat on the mat.", 200, {{"ignore_eos", true}}));
    });
  for (std::thread& t : clients) t.join();
  for (const HttpReply& r : replies) {
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = r.json();
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length") << r.body;
    EXPECT_LE(j["usage"]["prompt_tokens"].get<int64_t>() + j["usage"]["completion_tokens"].get<int64_t>(), 97);
  }
  EXPECT_GE(metric_value(http_get(c, "/metrics").body, "latte_cache_full_total"), full_before + 2);
  EXPECT_EQ(http_get(c, "/health").status, 200);
}

}  // namespace latte::testing::test_server_cache_pool
