#include "src/server/chat_page.h"

// In the build tree: generated from src/server/web/chat.html (CMakeLists.txt).
#include "src/server/web/chat_html.h"

namespace latte::server {

std::string_view chat_page_html() { return {kChatHtml, sizeof kChatHtml - 1}; }

}  // namespace latte::server
