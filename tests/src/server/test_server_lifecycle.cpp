// latte serve's slots and process: a client that hangs up mid-stream frees its slot at once (the
// request queued behind it then runs), a full queue answers 503, SIGTERM lets a running stream end
// cleanly and exits 0, and the informational endpoints (/metrics, /slots, /v1/models, /tokenize,
// /detokenize).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

#include "tests/src/server/server_process.h"

namespace latte::testing::test_server_lifecycle {

using nlohmann::json;
using std::chrono::milliseconds;

std::string slot_state(httplib::Client& c, int slot) {
  const json j = http_get(c, "/slots").json();
  return j.is_array() && static_cast<int>(j.size()) > slot ? j[slot]["state"].get<std::string>() : "?";
}

double metric(httplib::Client& c, const std::string& name) { return metric_value(http_get(c, "/metrics").body, name); }

TEST(ServerLifecycle, HangingUpFreesTheSlotAndAFullQueueIs503) {
  // One slot of 8192 tokens (beyond the model's training context, which only warns): a reply that
  // ignores end-of-text runs for seconds unless its client goes away.
  ServerProcess server({"--parallel", "1", "--max-queued", "1", "-c", "8192"});
  ASSERT_GT(server.port(), 0) << server.error();
  httplib::Client c = server.client();

  std::mutex m;
  std::condition_variable cv;
  bool hang_up = false;
  std::atomic<int> events{0};
  std::thread long_stream([&] {
    httplib::Client sc = server.client();
    post_event_stream(sc, "/v1/completions",
                      R"({"prompt": "Once upon a time", "stream": true, "ignore_eos": true, "temperature": 0})",
                      [&](const json&) {
                        ++events;
                        std::unique_lock lock(m);
                        cv.wait_for(lock, std::chrono::seconds(30), [&] { return hang_up; });
                        return false;  // hang up
                      });
  });
  ASSERT_TRUE(eventually([&] { return events.load() > 0 && slot_state(c, 0) == "generating"; }, milliseconds(20000)));

  // The slot is busy: one request may wait for it, the next is refused.
  HttpReply queued;
  std::thread waiting([&] {
    httplib::Client wc = server.client();
    queued = http_post(wc, "/v1/completions", R"({"prompt": "The cat", "max_tokens": 3})");
  });
  ASSERT_TRUE(eventually([&] { return metric(c, "latte_requests_queued") == 1; }, milliseconds(10000)));
  const HttpReply refused = http_post(c, "/v1/completions", R"({"prompt": "The dog", "max_tokens": 3})");
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(refused.json()["error"]["type"], "unavailable_error") << refused.body;

  {
    std::lock_guard lock(m);
    hang_up = true;
  }
  cv.notify_all();
  long_stream.join();
  waiting.join();  // it ran once the slot was free
  EXPECT_EQ(queued.status, 200) << queued.body;
  EXPECT_EQ(queued.json()["usage"]["completion_tokens"], 3) << queued.body;
  EXPECT_TRUE(eventually([&] { return metric(c, "latte_requests_cancelled_total") == 1; }, milliseconds(10000)));
  EXPECT_EQ(slot_state(c, 0), "idle");
  EXPECT_EQ(metric(c, "latte_slots_busy"), 0);
  // Cut short: far fewer tokens than the 8192 of a reply left to run (3 of them are the queued one's).
  EXPECT_LT(metric(c, "latte_generated_tokens_total"), 8000);
}

TEST(ServerLifecycle, SigtermLetsARunningStreamFinishThenExitsZero) {
  ServerProcess server({"--parallel", "1", "-c", "1024"});
  ASSERT_GT(server.port(), 0) << server.error();
  httplib::Client c = server.client();
  bool signalled = false;
  const EventStreamReply s = post_event_stream(
      c, "/v1/completions",
      R"({"prompt": "Once upon a time", "stream": true, "ignore_eos": true, "max_tokens": 64, "temperature": 0,
          "stream_options": {"include_usage": true}})",
      [&](const json&) {
        if (!signalled) ::kill(server.pid(), SIGTERM);
        signalled = true;
        return true;
      });
  ASSERT_TRUE(signalled);
  EXPECT_TRUE(s.done) << s.raw.substr(s.raw.size() > 500 ? s.raw.size() - 500 : 0);
  ASSERT_GE(s.events.size(), 2u);
  EXPECT_EQ(s.events.back()["usage"]["completion_tokens"], 64);  // it ran to its end (well within the 8 s)
  EXPECT_EQ(s.events[s.events.size() - 2]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(server.wait_exit(milliseconds(10000)), 0);
}

TEST(ServerLifecycle, MetricsSlotsModelsAndTokenizeRoundTrip) {
  ServerProcess server({"--parallel", "2", "--alias", "tiny"});
  ASSERT_GT(server.port(), 0) << server.error();
  httplib::Client c = server.client();
  ASSERT_EQ(http_post(c, "/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 5})").status, 200);

  const HttpReply m = http_get(c, "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("# TYPE latte_requests_total counter"), std::string::npos) << m.body;
  EXPECT_EQ(metric_value(m.body, "latte_requests_total"), 1) << m.body;
  EXPECT_EQ(metric_value(m.body, "latte_prompt_tokens_total"), 5) << m.body;
  EXPECT_EQ(metric_value(m.body, "latte_generated_tokens_total"), 5) << m.body;
  EXPECT_EQ(metric_value(m.body, "latte_requests_processing"), 0) << m.body;
  EXPECT_EQ(metric_value(m.body, "latte_slots_total"), 2) << m.body;

  const json slots = http_get(c, "/slots").json();
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_EQ(slots[1]["id"], 1);
  EXPECT_EQ(slots[1]["state"], "idle");
  EXPECT_EQ(slots[1]["n_ctx"], 256);

  const json models = http_get(c, "/v1/models").json();
  EXPECT_EQ(models["data"][0]["id"], "tiny");
  EXPECT_EQ(models["object"], "list");

  const json t = http_post(c, "/tokenize", R"({"content": "Once upon a time"})").json();
  const std::filesystem::path model = test_data_dir().parent_path().parent_path() / "models/tiny-mla-stories-f32.gguf";
  const CommandResult ids = run_latte("tokenize -m " + shell_quoted(model) + " -p 'Once upon a time'", false);
  std::string joined;
  for (const json& id : t["tokens"]) joined += (joined.empty() ? "" : " ") + std::to_string(id.get<int>());
  EXPECT_EQ(joined + "\n", ids.out);
  EXPECT_FALSE(joined.empty());
  const json d = http_post(c, "/detokenize", json{{"tokens", t["tokens"]}}.dump()).json();
  EXPECT_EQ(d["content"], "Once upon a time");
}

}  // namespace latte::testing::test_server_lifecycle
