// `latte run`: greedy continuations equal the reference engine's, seeds reproduce, limits and bad
// input behave, Ctrl-C stops cleanly with exit code 130.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/test_support.h"

namespace test_run_cli {

using latte::testing::run_latte;
using latte::testing::shared_dir;

// The n-th fenced code block of ../shared/models/README.md: the reference greedy stories.
std::string reference_story(int index) {
  std::ifstream in(shared_dir() / "models/README.md");
  std::string line, block;
  int seen = -1;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0) {
      if (inside && seen == index) return block.substr(0, block.size() - 1);  // drop the last '\n'
      inside = !inside;
      if (inside) ++seen, block.clear();
      continue;
    }
    if (inside) block += line + "\n";
  }
  return {};
}

std::string quoted(const std::filesystem::path& p) { return latte::testing::shell_quoted(p); }

constexpr const char* kPrompt = "Once upon a time";

TEST(RunCli, GreedyStories260KMatchesReferenceContinuation) {
  LATTE_REQUIRE_SHARED("models/stories260K.gguf");
  std::string expected = reference_story(0);
  ASSERT_EQ(expected.rfind(kPrompt, 0), 0u) << "unexpected README layout: " << expected;
  auto r = run_latte(std::string("run -m ") + quoted(shared_dir() / "models/stories260K.gguf") +
                         " -p 'Once upon a time' --temp 0 -n 64",
                     /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // The text always ends with a newline (the stderr summary starts a line of its own).
  EXPECT_EQ(r.out, expected.substr(std::string(kPrompt).size()) + "\n");
}

TEST(RunCli, GreedyDefaultModelMatchesTinyMlaReferenceContinuation) {
  LATTE_REQUIRE_SHARED("models/README.md");
  std::string expected = reference_story(1);
  ASSERT_EQ(expected.rfind(kPrompt, 0), 0u) << "unexpected README layout: " << expected;
  // No -m: the shipped default model (the tiny MLA story model).
  auto r = run_latte("run -p 'Once upon a time' --temp 0 -n 64", /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // The text always ends with a newline (the stderr summary starts a line of its own).
  EXPECT_EQ(r.out, expected.substr(std::string(kPrompt).size()) + "\n");
}

TEST(RunCli, EchoPrintsThePromptFirst) {
  auto plain = run_latte("run -p 'Once upon a time' --temp 0 -n 8", false);
  auto echoed = run_latte("run -p 'Once upon a time' --temp 0 -n 8 --echo", false);
  ASSERT_EQ(plain.exit_code, 0);
  ASSERT_EQ(echoed.exit_code, 0);
  EXPECT_EQ(echoed.out, std::string(kPrompt) + plain.out);
}

TEST(RunCli, SameSeedSameTextDifferentSeedDifferentText) {
  const std::string args = "run -p 'Once upon a time' -n 48 --temp 1.0 --top-k 0 --top-p 1 --min-p 0";
  auto a = run_latte(args + " -s 1", false);
  auto b = run_latte(args + " -s 1", false);
  auto c = run_latte(args + " -s 2", false);
  ASSERT_EQ(a.exit_code, 0) << a.out;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

TEST(RunCli, SummaryLineOnStderr) {
  auto r = run_latte("run -p 'Once upon a time' --temp 0 -n 5");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("prompt: 5 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("generated: 5 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("load: "), std::string::npos) << r.out;
}

TEST(RunCli, StopsAtAFullContext) {
  // 5 prompt tokens in a context of 12: at most 12 - 5 + 1 tokens can come out (the last one is
  // printed but can no longer be evaluated).
  auto r = run_latte("run -p 'Once upon a time' --temp 0 -n -1 -c 12 --ignore-eos");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("generated: 8 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(context full)"), std::string::npos) << r.out;
}

TEST(RunCli, BadInputIsAOneLineErrorWithNonZeroExit) {
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {"run -p 'Once upon a time' -c 3", "more than the context of 3"},
      {"run -m /nonexistent/model.gguf -p hi", "/nonexistent/model.gguf"},
      {"run", "give a prompt with -p TEXT or -f FILE"},
      {"run -f /nonexistent/prompt.txt", "/nonexistent/prompt.txt"},
      {"run -p hi --temp -1", "--temp"},
      {"run -p hi --cache-type q5_k", "--cache-type"},
      {"run -p hi --bogus-flag", "--bogus-flag"},
      {"run -p hi -n x", "-n: 'x' is not an integer"},
      {"run -f /", "/: is a directory, not a prompt file"},
      {"run -m / -p hi", "/: not a regular file"},
  };
  for (const Case& c : cases) {
    auto r = run_latte(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << " -> " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.args << " -> " << r.out;
  }
}

TEST(RunCli, CtrlCStopsGenerationAndPrintsTheSummary) {
  // A long generation (context far beyond what it can fill before the signal); SIGINT once the
  // first text has arrived. The process must print the summary marked as interrupted and exit 130
  // (128 + SIGINT, what a shell reports for a process Ctrl-C ended).
  int out_pipe[2], err_pipe[2];
  ASSERT_EQ(pipe(out_pipe), 0);
  ASSERT_EQ(pipe(err_pipe), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]);
    close(err_pipe[0]);
    std::string bin = latte::testing::latte_binary().string();
    execl(bin.c_str(), bin.c_str(), "run", "-p", "Once upon a time", "-n", "-1", "-c", "20000", "--ignore-eos", "-t",
          "1", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  char buf[256];
  ssize_t got = read(out_pipe[0], buf, sizeof buf);  // blocks until the first text streams out
  ASSERT_GT(got, 0);
  kill(pid, SIGINT);
  std::string out(buf, static_cast<size_t>(got)), err;
  while ((got = read(out_pipe[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(got));
  while ((got = read(err_pipe[0], buf, sizeof buf)) > 0) err.append(buf, static_cast<size_t>(got));
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 130) << err;
  EXPECT_NE(err.find("(interrupted)"), std::string::npos) << err;
  EXPECT_FALSE(out.empty());
}

}  // namespace test_run_cli
