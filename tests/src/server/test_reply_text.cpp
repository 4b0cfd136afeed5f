// The server's text pipeline without HTTP: stop strings held back across pieces, and a chat
// reply's <think>...</think> span routed to reasoning_content with the tags dropped, tokens
// arriving one at a time (the shipped tiny model's tokenizer).
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "ggml-like/gguf/gguf.h"
#include "src/server/reply_text.h"
#include "src/server/stop_strings.h"
#include "tests/support/test_support.h"

namespace latte::testing::test_reply_text {

TEST(StopStrings, HoldsBackAPossibleStartAndCutsBeforeTheMatch) {
  server::StopStrings stops({"END", "\n\n"});
  EXPECT_EQ(stops.push("one E"), "one ");  // "E" may start END
  EXPECT_EQ(stops.push("N"), "");          // "EN" still may
  EXPECT_EQ(stops.push("x two\n"), "ENx two");
  EXPECT_FALSE(stops.matched());
  EXPECT_EQ(stops.push("\nthree"), "");
  EXPECT_TRUE(stops.matched());
  EXPECT_EQ(stops.push("more"), "");
  EXPECT_EQ(stops.flush(), "");
}

TEST(StopStrings, FlushGivesBackAPartialStopAtTheEnd) {
  server::StopStrings stops({"User:"});
  EXPECT_EQ(stops.push("Bye. Us"), "Bye. ");
  EXPECT_EQ(stops.flush(), "Us");
  EXPECT_FALSE(stops.matched());
}

struct Reply {
  std::string content, reasoning;
};

Reply run_reply(const Tokenizer& tok, const std::string& text, server::ReplyText::Options options) {
  server::ReplyText reply(tok, std::move(options));
  Reply out;
  for (int32_t id : tok.encode(text, false, false)) {
    server::ReplyDelta d = reply.push(id);
    out.content += d.content;
    out.reasoning += d.reasoning;
    if (reply.stopped()) break;
  }
  server::ReplyDelta d = reply.finish();
  out.content += d.content;
  out.reasoning += d.reasoning;
  return out;
}

TEST(ReplyText, ThinkingGoesToReasoningAndStopsApply) {
  const std::filesystem::path path = test_data_dir().parent_path().parent_path() / "models/tiny-mla-stories-f32.gguf";
  const ggl::GgufFile file(path.string());
  const std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(file);

  const Reply chat = run_reply(*tok, " <think>\nthe cat is big</think>\n\nThe cat sat.",
                               {.split_thinking = true, .trim_leading_space = true});
  EXPECT_EQ(chat.reasoning, "the cat is big");
  EXPECT_EQ(chat.content, "The cat sat.");
  // The generation prompt opened the span: the reply starts inside it.
  const Reply opened = run_reply(*tok, "a dog</think>A dog ran.",
                                 {.split_thinking = true, .starts_thinking = true, .trim_leading_space = true});
  EXPECT_EQ(opened.reasoning, "a dog");
  EXPECT_EQ(opened.content, "A dog ran.");
  // Completions keep everything as content, tags included; a stop string cuts it.
  const Reply plain = run_reply(*tok, "<think>x</think> The end. More", {.stop = {" More"}});
  // (The SentencePiece vocabulary puts a space before encoded text; a reply's decoder keeps it,
  // since a reply continues its prompt's text.)
  EXPECT_EQ(plain.content, " <think>x</think> The end.");
  EXPECT_EQ(plain.reasoning, "");
}

}  // namespace latte::testing::test_reply_text
