// `latte tokenize -m MODEL (-p TEXT | -f FILE) [--bos] [--special] [--pieces]`: the token ids of a
// text under a model's tokenizer, space-separated on one line (--pieces: one token per line,
// with the bytes it stands for).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "ggml-like/gguf/gguf.h"
#include "src/cli/commands/commands.h"
#include "src/cli/flags/parse_flags.h"
#include "src/cli/text_input.h"
#include "src/tokenizer/tokenizer.h"
#include "src/tokenizer/utf8.h"

namespace latte::cli {

namespace {

// A piece as a quoted, printable string: valid UTF-8 is shown as it is, except quotes,
// backslashes and control characters, which are escaped; other bytes are shown as \xNN.
std::string printable_piece(std::string_view piece) {
  std::string out = "'";
  while (!piece.empty()) {
    int n = utf8::valid_char_length(piece);
    unsigned char c = static_cast<unsigned char>(piece[0]);
    if (n == 1 && c >= 0x20 && c != 0x7F && c != '\'' && c != '\\')
      out += piece[0];
    else if (n == 1 && c == '\n')
      out += "\\n";
    else if (n == 1 && c == '\t')
      out += "\\t";
    else if (n == 1 && c == '\r')
      out += "\\r";
    else if (n == 1 && (c == '\'' || c == '\\'))
      out += fmt::format("\\{}", piece[0]);
    else if (n > 1)
      out.append(piece.substr(0, n));
    else
      out += fmt::format("\\x{:02X}", c);
    piece.remove_prefix(n > 0 ? n : 1);
  }
  return out + "'";
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  CLI::App app{"Print the token ids of a text under a model's tokenizer", argv[0]};
  std::string model, prompt, file;
  bool add_bos = false, parse_special = false, pieces = false;
  app.add_option("-m,--model", model, "GGUF model (or vocabulary) file")->required();
  auto* p = app.add_option("-p,--prompt", prompt, "the text to tokenize");
  auto* f = app.add_option("-f,--file", file, "read the text from this file (bytes as they are)");
  p->excludes(f);
  app.add_flag("--bos", add_bos, "put the model's BOS token first");
  app.add_flag("--special", parse_special, "parse special-token text such as <|endoftext|> as that token");
  app.add_flag("--pieces", pieces, "print one token per line: id and the text it stands for");
  if (auto done = parse_flags(app, argc, argv)) return *done;
  if (p->count() == 0 && f->count() == 0) ggl::fail("give the text with -p TEXT or -f FILE");

  ggl::GgufFile gguf(model);
  auto tokenizer = Tokenizer::from_gguf(gguf);
  std::string text = f->count() ? read_text_file(file, "text file") : prompt;
  std::vector<int32_t> ids = tokenizer->encode(text, add_bos, parse_special);

  if (pieces) {
    for (int32_t id : ids) fmt::print("{:>7} {}\n", id, printable_piece(tokenizer->token_to_piece(id)));
  } else {
    fmt::print("{}\n", fmt::join(ids, " "));
  }
  return 0;
}

}  // namespace latte::cli
