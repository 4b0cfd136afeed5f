// latte serve's answers to bad input: every malformed or out-of-range request is a 4xx in OpenAI's
// error shape and the server keeps serving; the API key, unknown paths, the body size limit, and
// bad command-line flags (a one-line error, exit status 1).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/src/server/server_process.h"

namespace latte::testing::test_server_errors {

using nlohmann::json;

// Checks an error reply: the status, OpenAI's {"error": {"message", "type", "code"}}, and a
// message that says what is wrong.
void expect_error(const HttpReply& r, int status, const std::string& type, const std::string& says) {
  EXPECT_EQ(r.status, status) << r.body;
  const json j = r.json();
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
  EXPECT_EQ(j["error"]["type"], type) << r.body;
  EXPECT_EQ(j["error"]["code"], status) << r.body;
  EXPECT_NE(j["error"]["message"].get<std::string>().find(says), std::string::npos)
      << "message '" << j["error"]["message"] << "' should say '" << says << "'";
}

struct BadRequest {
  const char* path;
  std::string body;
  const char* says;
};

TEST(ServerErrors, EveryBadRequestIsA400AndTheServerGoesOn) {
  ServerProcess server({"--parallel", "1"});
  ASSERT_GT(server.port(), 0) << server.error();
  httplib::Client c = server.client();
  const std::string chat = "/v1/chat/completions", text = "/v1/completions";
  const std::string hi = R"("messages": [{"role": "user", "content": "hi"}])";
  std::string long_prompt = "[1";
  for (int i = 0; i < 300; ++i) long_prompt += ",300";  // 301 tokens; a slot holds 256
  long_prompt += "]";
  const std::vector<BadRequest> cases = {
      {chat.c_str(), "not json", "not valid JSON"},
      {chat.c_str(), "[1, 2]", "must be a JSON object"},
      {chat.c_str(), "{}", "'messages' is required"},
      {chat.c_str(), R"({"messages": "hi"})", "'messages' must be an array"},
      {chat.c_str(), R"({"messages": []})", "must not be empty"},
      {chat.c_str(), R"({"messages": [{"role": "robot", "content": "x"}]})", "'robot' is not supported"},
      {chat.c_str(), R"({"messages": [{"role": "user", "content": 5}]})", "content must be a string"},
      {chat.c_str(), "{" + hi + R"(, "temperature": -0.5})", "'temperature' must be >= 0"},
      {chat.c_str(), "{" + hi + R"(, "temperature": "hot"})", "'temperature' must be a number"},
      {chat.c_str(), "{" + hi + R"(, "top_p": 0})", "'top_p' must be in (0, 1]"},
      {chat.c_str(), "{" + hi + R"(, "top_p": 1.5})", "'top_p' must be in (0, 1]"},
      {chat.c_str(), "{" + hi + R"(, "max_tokens": 0})", "'max_tokens' must be >= 1"},
      {chat.c_str(), "{" + hi + R"(, "max_completion_tokens": -3})", "'max_completion_tokens' must be >= 1"},
      {chat.c_str(), "{" + hi + R"(, "max_tokens": 2.5})", "'max_tokens' must be an integer"},
      {chat.c_str(), "{" + hi + R"(, "n": 2})", "'n' = 2 is not supported"},
      {chat.c_str(), "{" + hi + R"(, "stream": "yes"})", "'stream' must be true or false"},
      {chat.c_str(), "{" + hi + R"(, "stop": 7})", "'stop' must be a string or an array of strings"},
      {chat.c_str(), "{" + hi + R"(, "presence_penalty": 3})", "'presence_penalty' must be in [-2, 2]"},
      {chat.c_str(), "{" + hi + R"(, "seed": -7})", "'seed' must be >= 0"},
      {chat.c_str(), "{" + hi + R"(, "logprobs": true, "top_logprobs": 21})", "'top_logprobs' must be in [0, 20]"},
      {chat.c_str(), "{" + hi + R"(, "top_logprobs": 2})", "'top_logprobs' needs 'logprobs': true"},
      {text.c_str(), R"({"prompt": "a", "logprobs": -1})", "'logprobs' must be in [0, 20]"},
      {chat.c_str(), "{" + hi + R"(, "cache_prompt": 1})", "'cache_prompt' must be true or false"},
      {text.c_str(), "{}", "'prompt' is required"},
      {text.c_str(), R"({"prompt": 5})", "'prompt' must be a string or an array"},
      {text.c_str(), R"({"prompt": ["a", "b"]})", "several prompts"},
      {text.c_str(), R"({"prompt": [99999999]})", "outside the vocabulary"},
      {text.c_str(), R"({"prompt": )" + long_prompt + "}", "more than the context of 256 tokens"},
      {"/tokenize", R"({"content": 5})", "'content' must be a string"},
      {"/detokenize", R"({"tokens": [1, -1]})", "outside the vocabulary"},
  };
  for (const BadRequest& bad : cases) {
    SCOPED_TRACE(std::string(bad.path) + " " + bad.body.substr(0, 80));
    expect_error(http_post(c, bad.path, bad.body), 400, "invalid_request_error", bad.says);
  }
  const HttpReply ok = http_post(c, text, R"({"prompt": "Once", "max_tokens": 2})");
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(http_get(c, "/health").status, 200);
}

TEST(ServerErrors, UnknownPathsAre404) {
  ServerProcess server({"--parallel", "1"});
  ASSERT_GT(server.port(), 0) << server.error();
  httplib::Client c = server.client();
  expect_error(http_get(c, "/v1/nothing"), 404, "not_found_error", "/v1/nothing");
  expect_error(http_get(c, "/v1/chat/completions"), 404, "not_found_error", "GET /v1/chat/completions");
  expect_error(http_post(c, "/v2/completions", "{}"), 404, "not_found_error", "/v2/completions");
}

TEST(ServerErrors, BodiesOverTheLimitAre413) {
  ServerProcess server({"--parallel", "1", "--max-body-size", "1000"});
  ASSERT_GT(server.port(), 0) << server.error();
  httplib::Client c = server.client();
  const std::string big = json{{"prompt", std::string(2000, 'a')}, {"max_tokens", 1}}.dump();
  expect_error(http_post(c, "/v1/completions", big), 413, "invalid_request_error", "larger than 1000 bytes");
  EXPECT_EQ(http_post(c, "/v1/completions", R"({"prompt": "Once", "max_tokens": 1})").status, 200);
}

TEST(ServerErrors, TheApiKeyGuardsEverythingButHealth) {
  ServerProcess server({"--parallel", "1", "--api-key", "sesame"});
  ASSERT_GT(server.port(), 0) << server.error();
  httplib::Client c = server.client();
  const std::string body = R"({"prompt": "Once", "max_tokens": 1})";
  expect_error(http_post(c, "/v1/completions", body), 401, "authentication_error", "API key");
  expect_error(http_post(c, "/v1/completions", body, {{"Authorization", "Bearer wrong"}}), 401, "authentication_error",
               "API key");
  expect_error(http_get(c, "/v1/models"), 401, "authentication_error", "API key");
  expect_error(http_get(c, "/metrics"), 401, "authentication_error", "API key");
  EXPECT_EQ(http_post(c, "/v1/completions", body, {{"Authorization", "Bearer sesame"}}).status, 200);
  EXPECT_EQ(http_get(c, "/v1/models", {{"Authorization", "Bearer sesame"}}).status, 200);
  EXPECT_EQ(http_get(c, "/health").status, 200);
}

TEST(ServerErrors, BadFlagsAreOneLineErrors) {
  for (const char* args : {"--port 70000", "--parallel 0", "-np x", "--max-queued -1", "--temp -1", "--bogus",
                           "-c 3 -np 4", "--host 203.0.113.77 --port 0"}) {
    const CommandResult r = run_latte(std::string("serve ") + args);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.out;
    EXPECT_EQ(r.out.rfind("latte serve: error: ", 0), 0u) << args << ": " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << args << ": " << r.out;
  }
}

}  // namespace latte::testing::test_server_errors
