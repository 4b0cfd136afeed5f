// A request's prompt as token ids: a chat's messages laid out by the model's chat template (as
// `latte chat` does: the template's markup as special tokens, the messages' text never parsed for
// special tokens), or a completion's text (BOS added when the vocabulary asks for it, special-token
// text parsed, as llama-server does) or token ids as given.
#pragma once
#include <cstdint>
#include <vector>

#include "src/chat/chat_template.h"
#include "src/server/completion_request.h"
#include "src/tokenizer/tokenizer.h"

namespace latte::server {

std::vector<int32_t> request_prompt(const CompletionRequest& request, const Tokenizer& tokenizer,
                                    const ChatTemplate& chat_template);

}  // namespace latte::server
