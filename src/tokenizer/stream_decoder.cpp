#include "src/tokenizer/stream_decoder.h"

#include <string_view>

#include "src/tokenizer/utf8.h"

namespace latte {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, Options options) : tokenizer_(tokenizer), options_(options) {}

std::string StreamDecoder::push(int32_t token) {
  std::string_view piece = tokenizer_.token_to_piece(token, options_.render_special);
  TokenType type = tokenizer_.token_type(token);
  bool is_text = type != TokenType::kControl && type != TokenType::kUnknown;
  if (at_start_ && is_text && !piece.empty()) {
    at_start_ = false;
    if (options_.strip_leading_space && tokenizer_.add_space_prefix() && piece.front() == ' ') piece.remove_prefix(1);
  }
  pending_.append(piece);

  std::string out;
  std::string_view rest = pending_;
  while (!rest.empty()) {
    int n = utf8::valid_char_length(rest);
    if (n > 0) {
      out.append(rest.substr(0, n));
      rest.remove_prefix(n);
    } else if (utf8::is_incomplete_prefix(rest)) {
      break;  // wait for the next token
    } else {
      out.append(utf8::kReplacement);
      rest.remove_prefix(utf8::invalid_prefix_length(rest));
    }
  }
  pending_.erase(0, pending_.size() - rest.size());
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  if (!pending_.empty()) out.append(utf8::kReplacement);
  pending_.clear();
  return out;
}

std::string detokenize(const Tokenizer& tokenizer, std::span<const int32_t> ids, StreamDecoder::Options options) {
  StreamDecoder decoder(tokenizer, options);
  std::string text;
  for (int32_t id : ids) text += decoder.push(id);
  text += decoder.flush();
  return text;
}

}  // namespace latte
