// latte serve's chat page: GET / answers the page compiled from src/server/web/chat.html, byte for
// byte, as HTML, without the API key (the page asks for it); it streams from /v1/chat/completions
// and loads nothing from elsewhere.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/src/server/server_process.h"

namespace latte::testing::test_server_chat_page {

std::string source_page() {
  std::ifstream in(test_data_dir() / "../../src/server/web/chat.html", std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ServerChatPage, RootServesTheBuiltInPageWithoutTheKey) {
  ServerProcess server({"--api-key", "secret"});
  ASSERT_GT(server.port(), 0) << server.error();
  httplib::Client c = server.client();
  const auto page = c.Get("/");
  ASSERT_TRUE(page) << httplib::to_string(page.error());
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  const std::string expected = source_page();
  ASSERT_FALSE(expected.empty()) << "src/server/web/chat.html not found";
  EXPECT_EQ(page->body, expected);
  // What it does, by the APIs it uses: streamed chat completions, a stop button, the key.
  for (const char* part : {"/v1/chat/completions", "stream: true", "getReader", "AbortController", "reasoning_content",
                           "<details", "Authorization", "Bearer "})
    EXPECT_NE(page->body.find(part), std::string::npos) << part;
  // No external resources: no absolute URLs, no scripts or styles loaded from files.
  for (const char* part : {"http://", "https://", "src=", "<link"})
    EXPECT_EQ(page->body.find(part), std::string::npos) << part;
  // Only the page is open: the API still needs the key.
  EXPECT_EQ(http_get(c, "/slots").status, 401);
  EXPECT_EQ(http_get(c, "/slots", {{"Authorization", "Bearer secret"}}).status, 200);
}

}  // namespace latte::testing::test_server_chat_page
