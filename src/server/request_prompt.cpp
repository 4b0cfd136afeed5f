#include "src/server/request_prompt.h"

#include "src/chat/conversation.h"

namespace latte::server {

std::vector<int32_t> request_prompt(const CompletionRequest& request, const Tokenizer& tokenizer,
                                    const ChatTemplate& chat_template) {
  if (request.endpoint == Endpoint::kChatCompletions) {
    // Conversation knows the special texts and how to tokenize rendered pieces.
    const Conversation conversation(chat_template, tokenizer);
    return conversation.tokenize(chat_template.render(request.messages, /*add_generation_prompt=*/true,
                                                      conversation.special_texts(), tokenizer.add_bos_default()));
  }
  if (request.prompt_ids) return *request.prompt_ids;
  const bool add_bos = tokenizer.add_bos_default() && tokenizer.bos() >= 0;
  return tokenizer.encode(request.prompt, add_bos, /*parse_special=*/true);
}

}  // namespace latte::server
