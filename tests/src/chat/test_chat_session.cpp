// ChatSession: each turn evaluates only the new tokens and replies as a from-scratch evaluation
// would; /reset and /system; overflow drops the oldest turns (recomputing or shifting); /save and
// /load restore the conversation and its cache so the next reply is the same.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "ggml-like/core/error.h"
#include "src/chat/chat_persistence.h"
#include "src/chat/chat_session.h"
#include "src/cli/default_model.h"
#include "src/runtime/cache_io.h"
#include "tests/support/test_support.h"

namespace test_chat_session {

namespace fs = std::filesystem;
using latte::ChatSession;
using latte::ChatTemplate;
using latte::TurnStats;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("latte-chat-session-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};
fs::path temp_dir() {
  static const TempDir dir;
  return dir.path;
}

struct StoryModel {
  latte::Model model{latte::cli::default_model_path()};
  std::unique_ptr<latte::Tokenizer> tok = latte::Tokenizer::from_gguf(model.file());
};
const StoryModel& story() {
  static StoryModel m;
  return m;
}

// A chat with the story model, greedy.
struct Chat {
  latte::Session session;
  latte::Sampler sampler;
  ChatSession chat;
  std::vector<std::string> notes;
  Chat(latte::ChatOptions o, int64_t n_ctx = 256, ggl::Type cache = ggl::Type::F32,
       const ChatTemplate& t = ChatTemplate::plain())
      : session(story().model, {.n_ctx = n_ctx, .cache_type = cache, .n_threads = 1}),
        sampler(latte::SamplingParams{.temp = 0}),
        chat(session, *story().tok, t, sampler, o) {}
  std::pair<TurnStats, std::string> say(const std::string& text) {
    std::string reply;
    TurnStats s = chat.respond(
        text, nullptr, [&reply](std::string_view p) { reply += p; },
        [this](std::string_view n) { notes.emplace_back(n); });
    return {s, reply};
  }
};

int64_t n_tokens(const std::string& text, bool bos = false) {
  return static_cast<int64_t>(story().tok->encode(text, bos, false).size());
}

TEST(ChatSession, EachTurnEvaluatesOnlyTheNewTokens) {
  Chat c({.n_predict = 12, .ignore_eos = true});
  auto [t1, r1] = c.say("Once upon a time");
  EXPECT_EQ(t1.reused, 0);
  EXPECT_EQ(t1.evaluated, n_tokens("Once upon a time", true));
  EXPECT_EQ(t1.generated, 12);
  EXPECT_FALSE(r1.empty());
  const int64_t after1 = c.session.n_past();
  EXPECT_EQ(after1, t1.evaluated + 12);

  auto [t2, r2] = c.say("She went to the park");
  EXPECT_EQ(t2.reused, after1);
  EXPECT_EQ(t2.evaluated, n_tokens("She went to the park"));
  auto [t3, r3] = c.say("The sun was hot");
  EXPECT_EQ(t3.evaluated, n_tokens("The sun was hot"));
  EXPECT_EQ(c.chat.total_evaluated(), t1.evaluated + t2.evaluated + t3.evaluated);
  EXPECT_EQ(c.session.n_past(), static_cast<int64_t>(c.chat.conversation().n_tokens()));
  EXPECT_EQ(c.chat.cached_tokens(), c.chat.conversation().tokens());
}

TEST(ChatSession, ReusedCacheRepliesLikeAFreshEvaluation) {
  // The third reply of a conversation equals the reply of a chat that loads the same messages
  // (text only) and evaluates them in one go.
  Chat c({.n_predict = 10, .ignore_eos = true});
  c.say("Once upon a time");
  c.say("She went to the park");
  const std::vector<latte::Message> before = c.chat.conversation().messages();
  auto [t3, r3] = c.say("The sun was hot");

  Chat fresh({.n_predict = 10, .ignore_eos = true});
  fresh.chat.replace_conversation(before);
  auto [f3, fr3] = fresh.say("The sun was hot");
  EXPECT_EQ(f3.reused, 0);
  EXPECT_GT(f3.evaluated, t3.evaluated);
  EXPECT_EQ(fr3, r3);
}

TEST(ChatSession, ChatTemplatesEvaluateClosingMarkupWithTheNextTurn) {
  Chat c({.n_predict = 6, .ignore_eos = true}, 256, ggl::Type::F32, ChatTemplate::by_name("deepseek2"));
  auto [t1, r1] = c.say("Hi");
  // BOS "User: Hi\n\n" "Assistant:"
  EXPECT_EQ(t1.evaluated, 1 + n_tokens("User: Hi\n\n") + n_tokens("Assistant:"));
  auto [t2, r2] = c.say("Bye");
  // The reply's EOS, then "User: Bye\n\n" and the generation prompt.
  EXPECT_EQ(t2.evaluated, 1 + n_tokens("User: Bye\n\n") + n_tokens("Assistant:"));
  EXPECT_NE(c.chat.conversation().messages()[1].content.front(), ' ');
}

TEST(ChatSession, ResetAndSystemPrompt) {
  Chat c({.n_predict = 8, .ignore_eos = true});
  auto [a1, ra] = c.say("Once upon a time");
  c.say("She went to the park");
  c.chat.reset();
  EXPECT_EQ(c.session.n_past(), 0);
  EXPECT_TRUE(c.chat.conversation().messages().empty());
  auto [b1, rb] = c.say("Once upon a time");
  EXPECT_EQ(b1.evaluated, a1.evaluated);
  EXPECT_EQ(rb, ra);  // same start, same greedy reply

  c.chat.set_system("The dog was big.");
  auto [s1, rs] = c.say("Then");
  // Everything after BOS changed: only BOS is reused.
  EXPECT_EQ(s1.reused, 1);
  EXPECT_EQ(s1.evaluated, static_cast<int64_t>(c.chat.conversation().n_tokens()) - 8 - 1);
  c.chat.reset();
  ASSERT_EQ(c.chat.conversation().messages().size(), 1u);  // the system prompt stays
  auto [s2, rs2] = c.say("Then");
  EXPECT_EQ(s2.reused, 0);
  EXPECT_EQ(s2.evaluated, n_tokens("The dog was big.", true) + n_tokens("Then"));
}

const char* const kLines[] = {"Once upon a time", "She went to the park", "The sun was hot",
                              "They ate a cake",  "He saw a big dog",     "The bird sang"};

void fill_until_dropped(Chat& c, int turns, std::vector<TurnStats>& stats) {
  for (int i = 0; i < turns; ++i) {
    stats.push_back(c.say(kLines[i % 6]).first);
    ASSERT_LE(c.session.n_past(), c.session.n_ctx());
    ASSERT_LE(static_cast<int64_t>(c.chat.conversation().n_tokens()), c.session.n_ctx());
  }
}

TEST(ChatSession, OverflowDropsTheOldestTurnsAndRecomputes) {
  Chat c({.n_predict = 10, .ignore_eos = true}, 64);
  c.chat.set_system("The cat");
  std::vector<TurnStats> stats;
  fill_until_dropped(c, 8, stats);
  int64_t dropped = 0;
  for (const TurnStats& s : stats) dropped += s.dropped_turns;
  EXPECT_GT(dropped, 0);
  ASSERT_FALSE(c.notes.empty());
  EXPECT_NE(c.notes[0].find("dropped the"), std::string::npos) << c.notes[0];
  EXPECT_EQ(c.chat.conversation().messages()[0].content, "The cat");
  for (size_t i = 0; i < stats.size(); ++i) {
    const TurnStats& s = stats[i];
    EXPECT_EQ(s.shifted, 0);
    // Recomputation: after a drop the system prompt stays cached, the kept turns are evaluated again.
    if (s.dropped_turns > 0) {
      EXPECT_GE(s.reused, static_cast<int64_t>(c.chat.conversation().messages()[0].tokens.size()));
      EXPECT_GT(s.evaluated, n_tokens(kLines[i % 6])) << "turn " << i;
    }
  }
  EXPECT_EQ(c.chat.cached_tokens(), c.chat.conversation().tokens());
}

TEST(ChatSession, OverflowWithContextShiftEvaluatesOnlyTheNewTokens) {
  Chat c({.n_predict = 10, .ignore_eos = true, .context_shift = true}, 64);
  c.chat.set_system("The cat");
  std::vector<TurnStats> stats;
  fill_until_dropped(c, 8, stats);
  bool any = false;
  for (size_t i = 1; i < stats.size(); ++i) {
    if (stats[i].dropped_turns == 0) continue;
    any = true;
    EXPECT_GT(stats[i].shifted, 0);
    // Only the new message is evaluated, the kept turns were shifted in the cache.
    EXPECT_EQ(stats[i].evaluated, n_tokens(kLines[i % 6])) << "turn " << i;
  }
  EXPECT_TRUE(any);
  EXPECT_EQ(c.chat.cached_tokens(), c.chat.conversation().tokens());
}

TEST(ChatSession, AReplyThatFillsTheContextGoesOnAfterDroppingTurns) {
  Chat c({.n_predict = 40, .ignore_eos = true}, 64);
  c.say("Once upon a time");
  auto [t, r] = c.say("She went to the park");  // 5 + 40 + 8 + 40 > 64
  EXPECT_EQ(t.generated, 40);
  EXPECT_EQ(t.dropped_turns, 1);
  EXPECT_NE(t.reason, latte::StopReason::kContextFull);
}

TEST(ChatSession, AMessageTooLongForTheContextIsRefused) {
  Chat c({.n_predict = 4}, 16);
  EXPECT_THROW(c.say("Once upon a time there was a little girl named Lily who liked to play in the park"), ggl::Error);
  EXPECT_TRUE(c.chat.conversation().messages().empty());
  auto [t, r] = c.say("Once upon a time");
  EXPECT_EQ(t.evaluated, n_tokens("Once upon a time", true));
}

TEST(ChatPersistence, SaveLoadResumesWithTheCacheAndTheSameReply) {
  const std::string path = (temp_dir() / "chat.json").string();
  Chat a({.n_predict = 12, .ignore_eos = true}, 256, ggl::Type::F16);
  a.chat.set_system("The dog");
  a.say("Once upon a time");
  a.say("She went to the park");
  const latte::SaveReport saved = latte::save_chat(a.chat, path);
  EXPECT_EQ(saved.messages, 5u);
  EXPECT_EQ(saved.cache_tokens, a.session.n_past());
  EXPECT_EQ(saved.cache_bytes, fs::file_size(path + ".cache"));
  EXPECT_EQ(saved.row_bytes, static_cast<size_t>(a.session.n_past()) * a.session.cache().bytes_per_token());
  EXPECT_EQ(saved.cache_bytes, saved.row_bytes + latte::kCacheFileHeaderBytes);
  auto [a3, ra3] = a.say("The sun was hot");

  Chat b({.n_predict = 12, .ignore_eos = true}, 256, ggl::Type::F16);
  const latte::LoadReport loaded = latte::load_chat(b.chat, path);
  EXPECT_EQ(loaded.messages, 5u);
  EXPECT_EQ(loaded.cache_tokens, saved.cache_tokens);
  EXPECT_TRUE(loaded.note.empty()) << loaded.note;
  EXPECT_EQ(b.session.n_past(), saved.cache_tokens);
  auto [b3, rb3] = b.say("The sun was hot");
  EXPECT_EQ(b3.reused, saved.cache_tokens);  // nothing recomputed
  EXPECT_EQ(b3.evaluated, a3.evaluated);
  EXPECT_EQ(rb3, ra3);
}

TEST(ChatPersistence, ACacheThatDoesNotFitIsSkippedAndTheConversationRecomputed) {
  const std::string path = (temp_dir() / "chat2.json").string();
  Chat a({.n_predict = 8, .ignore_eos = true}, 256, ggl::Type::F16);
  a.say("Once upon a time");
  latte::save_chat(a.chat, path);
  Chat b({.n_predict = 8, .ignore_eos = true}, 256, ggl::Type::Q8_0);
  const latte::LoadReport r = latte::load_chat(b.chat, path);
  EXPECT_EQ(r.cache_tokens, 0);
  EXPECT_NE(r.note.find("--cache-type"), std::string::npos) << r.note;
  auto [t, reply] = b.say("Then");
  EXPECT_EQ(t.reused, 0);
  EXPECT_EQ(t.evaluated, static_cast<int64_t>(b.chat.conversation().n_tokens()) - 8);
}

TEST(ChatPersistence, MalformedFilesAreOneLineErrors) {
  Chat c({.n_predict = 4});
  const std::string bad = (temp_dir() / "bad.json").string();
  std::ofstream(bad) << "{\"format\": \"latte-chat\", \"version\": 1, \"messages\": [{\"role\": \"robot\", "
                        "\"content\": \"x\"}]}";
  try {
    latte::load_chat(c.chat, bad);
    FAIL() << "no error";
  } catch (const ggl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown role 'robot'"), std::string::npos) << e.what();
  }
  std::ofstream(bad) << "not json";
  EXPECT_THROW(latte::load_chat(c.chat, bad), ggl::Error);
  std::ofstream(bad) << "{\"format\": \"other\"}";
  EXPECT_THROW(latte::load_chat(c.chat, bad), ggl::Error);
  EXPECT_THROW(latte::load_chat(c.chat, (temp_dir() / "none.json").string()), ggl::Error);
  // A hand-written file without token ids is rendered with the current template.
  std::ofstream(bad) << "{\"format\": \"latte-chat\", \"version\": 1, \"messages\": [{\"role\": \"user\", "
                        "\"content\": \"Once upon a time\"}]}";
  const latte::LoadReport r = latte::load_chat(c.chat, bad);
  EXPECT_EQ(r.tokens, n_tokens("Once upon a time", true));
}

}  // namespace test_chat_session
