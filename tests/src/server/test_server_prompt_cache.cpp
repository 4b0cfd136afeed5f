// latte serve's prompt cache: a finished request's tokens stay cached in its slot, and a later
// prompt sharing a prefix with them evaluates only the rest (usage.prompt_tokens_details.
// cached_tokens says how many it reused); a prefix held by a busy slot is copied. The servers run
// --deterministic, so a reply built on a reused prefix must equal a fresh server's exactly.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "tests/src/server/server_process.h"

namespace latte::testing::test_server_prompt_cache {

using nlohmann::json;
using std::chrono::milliseconds;

// A long shared beginning (about 70 tokens), made unique per use by `tag` so that no earlier
// request of the suite has it cached.
std::string long_prefix(const std::string& tag) {
  return "Once upon a time, there was a little girl named " + tag +
         ". She loved to play outside in the park with her friends. One day, she saw a big red ball "
         "under a tree. She ran to the ball and picked it up. Her mom smiled and said they could "
         "play together after lunch.";
}

std::string completion_body(const std::string& prompt, int max_tokens, json extra = json::object()) {
  json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
  body.update(extra);
  return body.dump();
}

int64_t cached_tokens(const json& reply) { return reply["usage"]["prompt_tokens_details"]["cached_tokens"]; }

class ServerPromptCache : public SharedServerSuite<ServerPromptCache> {
 public:
  // Slots of 4096 tokens (beyond the model's training context, which only warns): a reply that
  // ignores end-of-text holds its slot for seconds.
  static std::vector<std::string> server_flags() { return {"--parallel", "2", "-c", "8192", "--deterministic"}; }
};

TEST_F(ServerPromptCache, SharedPrefixIsReusedAndGivesTheFreshReply) {
  httplib::Client c = server_->client();
  const std::string prefix = long_prefix("Mia");
  const HttpReply first = http_post(c, "/v1/completions", completion_body(prefix + " Then it rained.", 4));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(cached_tokens(first.json()), 0);  // nothing of it was cached before
  const double cached_before = metric_value(http_get(c, "/metrics").body, "latte_prompt_tokens_cached_total");

  const std::string second_prompt = prefix + " The sun was hot.";
  const HttpReply second = http_post(c, "/v1/completions", completion_body(second_prompt, 16));
  ASSERT_EQ(second.status, 200) << second.body;
  const json s = second.json();
  const int64_t shared = s["usage"]["prompt_tokens"].get<int64_t>() - 6;  // all but " The sun was hot." or so
  EXPECT_GE(cached_tokens(s), shared - 2) << second.body;
  EXPECT_LT(cached_tokens(s), s["usage"]["prompt_tokens"].get<int64_t>());  // the last token is evaluated again
  const std::string metrics = http_get(c, "/metrics").body;
  EXPECT_EQ(metric_value(metrics, "latte_prompt_tokens_cached_total"), cached_before + cached_tokens(s)) << metrics;
  const json slots = http_get(c, "/slots").json();
  EXPECT_TRUE(slots[0]["n_cached"] == cached_tokens(s) || slots[1]["n_cached"] == cached_tokens(s)) << slots.dump();

  // A fresh server, and this one told not to reuse anything, give the same reply.
  ServerProcess fresh({"--parallel", "1", "--deterministic"});
  ASSERT_GT(fresh.port(), 0) << fresh.error();
  httplib::Client fc = fresh.client();
  const HttpReply alone = http_post(fc, "/v1/completions", completion_body(second_prompt, 16));
  ASSERT_EQ(alone.status, 200) << alone.body;
  EXPECT_EQ(s["choices"][0]["text"], alone.json()["choices"][0]["text"]);
  const HttpReply uncached =
      http_post(c, "/v1/completions", completion_body(second_prompt, 16, {{"cache_prompt", false}}));
  ASSERT_EQ(uncached.status, 200) << uncached.body;
  EXPECT_EQ(cached_tokens(uncached.json()), 0);
  EXPECT_EQ(uncached.json()["choices"][0]["text"], alone.json()["choices"][0]["text"]);
}

TEST_F(ServerPromptCache, ChatSecondTurnReusesTheFirst) {
  httplib::Client c = server_->client();
  json messages = {{{"role", "system"}, {"content", long_prefix("Zoe")}},
                   {{"role", "user"}, {"content", "Tell me a story"}}};
  const HttpReply first = http_post(c, "/v1/chat/completions",
                                    json({{"messages", messages}, {"max_tokens", 8}, {"temperature", 0}}).dump());
  ASSERT_EQ(first.status, 200) << first.body;
  const json f = first.json();
  messages.push_back({{"role", "assistant"}, {"content", f["choices"][0]["message"]["content"]}});
  messages.push_back({{"role", "user"}, {"content", "And then?"}});
  // Streamed, the usage chunk carries the count too.
  const EventStreamReply second = post_event_stream(c, "/v1/chat/completions",
                                                    json({{"messages", messages},
                                                          {"max_tokens", 4},
                                                          {"temperature", 0},
                                                          {"stream", true},
                                                          {"stream_options", {{"include_usage", true}}}})
                                                        .dump());
  ASSERT_TRUE(second.done) << second.raw;
  const json& usage = second.events.back();
  ASSERT_TRUE(usage.contains("usage")) << second.raw;
  // At least the whole first prompt (the template lays the first turn out the same way again).
  EXPECT_GE(cached_tokens(usage), f["usage"]["prompt_tokens"].get<int64_t>()) << second.raw;
}

TEST_F(ServerPromptCache, ConcurrentRequestCopiesTheBusySlotsPrefix) {
  const std::string prefix = long_prefix("Ava");
  httplib::Client c = server_->client();
  const double cached_before = metric_value(http_get(c, "/metrics").body, "latte_prompt_tokens_cached_total");
  // A long reply holds one slot while a second request with the same beginning comes in: the
  // other slot never saw this prefix, so reusing it means copying the busy slot's rows.
  std::mutex m;
  std::condition_variable cv;
  bool hang_up = false;
  std::atomic<int> events{0};
  std::thread long_stream([&] {
    httplib::Client sc = server_->client();
    post_event_stream(sc, "/v1/completions",
                      completion_body(prefix + " She sang.", 4000, {{"stream", true}, {"ignore_eos", true}}),
                      [&](const json&) {
                        ++events;
                        std::unique_lock lock(m);
                        cv.wait_for(lock, std::chrono::seconds(30), [&] { return hang_up; });
                        return false;
                      });
  });
  const auto generating = [&] {
    const json slots = http_get(c, "/slots").json();
    return slots.is_array() && (slots[0]["state"] == "generating" || slots[1]["state"] == "generating");
  };
  ASSERT_TRUE(eventually([&] { return events.load() > 0 && generating(); }, milliseconds(20000)));
  const HttpReply second = http_post(c, "/v1/completions", completion_body(prefix + " He ran.", 4));
  EXPECT_TRUE(generating()) << "the long reply ended before the second request: nothing was copied";
  {
    std::lock_guard lock(m);
    hang_up = true;
  }
  cv.notify_all();
  long_stream.join();
  ASSERT_EQ(second.status, 200) << second.body;
  const json s = second.json();
  EXPECT_GE(cached_tokens(s), s["usage"]["prompt_tokens"].get<int64_t>() - 5) << second.body;
  EXPECT_GE(metric_value(http_get(c, "/metrics").body, "latte_prompt_tokens_cached_total"),
            cached_before + cached_tokens(s));
}

TEST(ServerPromptCacheOff, NoCachePromptReusesNothing) {
  ServerProcess server({"--parallel", "1", "--no-cache-prompt"});
  ASSERT_GT(server.port(), 0) << server.error();
  httplib::Client c = server.client();
  const std::string body = completion_body(long_prefix("Ben"), 4);
  for (int i = 0; i < 2; ++i) {
    const HttpReply r = http_post(c, "/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(cached_tokens(r.json()), 0) << "request " << i;
  }
  EXPECT_EQ(metric_value(http_get(c, "/metrics").body, "latte_prompt_tokens_cached_total"), 0);
  const HttpReply bad = http_post(c, "/v1/completions", completion_body("Hi", 2, {{"cache_prompt", "yes"}}));
  EXPECT_EQ(bad.status, 400) << bad.body;
}

}  // namespace latte::testing::test_server_prompt_cache
