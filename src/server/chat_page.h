// The built-in chat page that GET / serves (src/server/web/chat.html, compiled in at build time):
// a conversation streamed from /v1/chat/completions, with no external resources.
#pragma once
#include <string_view>

namespace latte::server {

std::string_view chat_page_html();

}  // namespace latte::server
