// `latte eval` through the binary: logits of real models and fixtures against the references,
// and one-line errors with a non-zero exit for bad input.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/logit_metrics.h"
#include "tests/support/test_support.h"

namespace test_eval_cli {

namespace fs = std::filesystem;

struct Result {
  int exit_code;
  std::string out, err;
};

class EvalCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("latte-eval-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  Result eval(const std::string& args) const {
    const std::string cmd = latte::testing::latte_binary().string() + " eval " + args + " > " +
                            (dir_ / "stdout").string() + " 2> " + (dir_ / "stderr").string();
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir_ / "stdout"), slurp(dir_ / "stderr")};
  }

  fs::path write_file(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }

  static std::string shared(const std::string& rel) { return (latte::testing::shared_dir() / rel).string(); }

  // Runs eval and returns the metrics against `reference`.
  latte::testing::LogitMetrics run_and_compare(const std::string& model, const std::string& tokens,
                                               const std::string& reference, size_t n_vocab,
                                               const std::string& extra) const {
    const fs::path out = dir_ / "logits.f32";
    const Result r =
        eval("-m " + shared(model) + " --tokens " + shared(tokens) + " --logits-out " + out.string() + " " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "");
    const auto m = latte::testing::compare_logits(latte::testing::read_f32_file(shared(reference)),
                                                  latte::testing::read_f32_file(out), n_vocab);
    std::printf("[metrics] latte eval %s %s: nrmse=%.3e mean_kl=%.3e max_kl=%.3e top1=%.3f\n", model.c_str(),
                extra.c_str(), m.nrmse, m.mean_kl, m.max_kl, m.top1);
    return m;
  }

  // Expects a failure with exactly one line on stderr containing `needle`, nothing on stdout.
  void expect_error(const std::string& args, const std::string& needle) const {
    const Result r = eval(args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("latte eval: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err << "expected: " << needle;
  }

  fs::path dir_;
};

TEST_F(EvalCli, Stories260KMatchesTheReference) {
  LATTE_REQUIRE_SHARED("models/stories260K.gguf");
  const auto m = run_and_compare("models/stories260K.gguf", "models/stories260K.tokens.txt",
                                 "models/stories260K.logits.f32", 512, "--cache-type f32 --batch 16 -t 2");
  EXPECT_LE(m.nrmse, 1e-3);
  EXPECT_LE(m.max_kl, 1e-4);
  EXPECT_EQ(m.top1, 1.0);
}

TEST_F(EvalCli, TinyMlaStoriesDecodesThroughTheLatentCache) {
  LATTE_REQUIRE_SHARED("models/tiny-mla-stories-f32.gguf");
  for (const char* extra : {"--cache-type f32 --decode-from 40 --mla-mode absorb", "--cache-type f32 --mla-mode naive",
                            "--decode-from 10 --batch 7"}) {
    const auto m = run_and_compare("models/tiny-mla-stories-f32.gguf", "models/tiny-mla-stories.tokens.txt",
                                   "models/tiny-mla-stories-f32.logits.f32", 512, extra);
    EXPECT_LE(m.nrmse, std::string(extra).find("f32") != std::string::npos ? 1e-3 : 2e-3) << extra;
    EXPECT_EQ(m.top1, 1.0) << extra;
  }
}

TEST_F(EvalCli, DeepQuantizedFixtureWithDefaults) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-lite-27l-q8_0.gguf");
  const auto m = run_and_compare("fixtures/ds2-lite-27l-q8_0.gguf", "fixtures/ds2-lite-27l-q8_0.tokens.txt",
                                 "fixtures/ds2-lite-27l-q8_0.exact-logits.f32", 512, "--decode-from 40");
  EXPECT_LE(m.nrmse, std::max(1.25 * 0.0740, 0.005));
  EXPECT_LE(m.mean_kl, std::max(1.5 * 0.0306, 1e-4));
}

TEST_F(EvalCli, BadInputGivesOneLineErrors) {
  LATTE_REQUIRE_SHARED("models/stories260K.gguf");
  const std::string model = "-m " + shared("models/stories260K.gguf");
  const std::string out = " --logits-out " + (dir_ / "x.f32").string();
  const fs::path good = write_file("good.txt", "1 2 3 4 5\n");
  expect_error(model + " --tokens " + write_file("range.txt", "1 2 512 3").string() + out,
               "token 512 at position 2 is outside the vocabulary of 512 tokens");
  expect_error(model + " --tokens " + write_file("neg.txt", "1 -4").string() + out, "token -4 at position 1");
  expect_error(model + " --tokens " + good.string() + " -c 4" + out, "5 tokens exceed the context of 4 tokens");
  expect_error(model + " --tokens " + (dir_ / "absent.txt").string() + out, "absent.txt: no such token file");
  expect_error(model + " --tokens " + dir_.string() + out, dir_.string() + ": is a directory, not a token file");
  expect_error(model + " --tokens " + good.string() + " --logits-out " + dir_.string(),
               "--logits-out " + dir_.string() + ": is a directory; give a file name");
  expect_error(model + " --tokens " + write_file("bad.txt", "1 2 x3 4").string() + out,
               "'x3' (token 2) is not a token id");
  expect_error(model + " --tokens " + write_file("empty.txt", " \n").string() + out, "no token ids");
  expect_error(model + " --tokens " + good.string() + " --cache-type q4_1" + out, "--cache-type 'q4_1'");
  expect_error(model + " --tokens " + good.string() + " --mla-mode fast" + out, "--mla-mode 'fast'");
  expect_error(model + " --tokens " + good.string() + " --decode-from 9" + out, "--decode-from 9");
  expect_error(model + " --tokens " + good.string() + " --cache-type q8_0" + out, "cache type q8_0");
  expect_error("-m " + (dir_ / "none.gguf").string() + " --tokens " + good.string() + out, "none.gguf");
  EXPECT_FALSE(fs::exists(dir_ / "x.f32"));
}

TEST_F(EvalCli, WritesExactlyTheLogitsOfTheGivenTokens) {
  LATTE_REQUIRE_SHARED("models/stories260K.gguf");
  const fs::path out = dir_ / "l.f32";
  const Result r = eval("-m " + shared("models/stories260K.gguf") + " --tokens " +
                        write_file("t.txt", "1 400\n 20\t7").string() + " --logits-out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fs::file_size(out), 4u * 512u * sizeof(float));
}

}  // namespace test_eval_cli
