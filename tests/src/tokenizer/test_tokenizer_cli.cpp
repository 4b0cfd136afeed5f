// `latte tokenize`: ids on one line, --pieces, --bos, --special, -f, and one-line errors.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>

#include "ggml-like/gguf/gguf.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/test_support.h"

namespace test_tokenizer_cli {

using latte::testing::run_latte;
using latte::testing::shared_dir;

std::string model_arg(const char* relpath) { return "-m '" + (shared_dir() / relpath).string() + "'"; }

TEST(TokenizeCli, StoryPromptWithBos) {
  LATTE_REQUIRE_SHARED("models/stories260K.gguf");
  auto r = run_latte("tokenize " + model_arg("models/stories260K.gguf") + " -p 'Once upon a time' --bos");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "1 403 407 261 378\n");
  auto no_bos = run_latte("tokenize " + model_arg("models/stories260K.gguf") + " -p 'Once upon a time'");
  EXPECT_EQ(no_bos.out, "403 407 261 378\n");
}

TEST(TokenizeCli, PiecesShowIdAndBytes) {
  LATTE_REQUIRE_SHARED("models/stories260K.gguf");
  auto r = run_latte("tokenize " + model_arg("models/stories260K.gguf") + " -p 'Once upon' --bos --pieces");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "      1 '<s>'\n    403 ' Once'\n    407 ' upon'\n");
}

TEST(TokenizeCli, FileInputMatchesTheLibraryAndSpecialIsOptIn) {
  LATTE_REQUIRE_SHARED("vocab/ggml-vocab-gpt-2.gguf");
  const std::string text = "Hello\n\tworld<|endoftext|> 🦙 42\n";
  auto path = std::filesystem::temp_directory_path() / "latte_tokenize_cli_input.txt";
  std::ofstream(path, std::ios::binary) << text;
  ggl::GgufFile file((shared_dir() / "vocab/ggml-vocab-gpt-2.gguf").string());
  auto tok = latte::Tokenizer::from_gguf(file);

  auto plain = run_latte("tokenize " + model_arg("vocab/ggml-vocab-gpt-2.gguf") + " -f '" + path.string() + "'");
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  EXPECT_EQ(plain.out, fmt::format("{}\n", fmt::join(tok->encode(text, false, false), " ")));
  EXPECT_EQ(plain.out.find("50256"), std::string::npos);

  auto special =
      run_latte("tokenize " + model_arg("vocab/ggml-vocab-gpt-2.gguf") + " --special -f '" + path.string() + "'");
  ASSERT_EQ(special.exit_code, 0) << special.out;
  EXPECT_EQ(special.out, fmt::format("{}\n", fmt::join(tok->encode(text, false, true), " ")));
  EXPECT_NE(special.out.find("50256"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(TokenizeCli, ErrorsAreOneLine) {
  LATTE_REQUIRE_SHARED("fixtures/ds2-mini-mla-f32.gguf");
  auto none = run_latte("tokenize " + model_arg("fixtures/ds2-mini-mla-f32.gguf") + " -p hi");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.out.find("latte tokenize: error: "), std::string::npos) << none.out;
  EXPECT_NE(none.out.find("no tokenizer"), std::string::npos) << none.out;
  EXPECT_EQ(std::count(none.out.begin(), none.out.end(), '\n'), 1) << none.out;

  auto no_text = run_latte("tokenize " + model_arg("fixtures/ds2-mini-mla-f32.gguf"));
  EXPECT_EQ(no_text.exit_code, 1);
  EXPECT_NE(no_text.out.find("-p TEXT or -f FILE"), std::string::npos) << no_text.out;

  auto missing = run_latte("tokenize -m /nonexistent/model.gguf -p hi");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.out.find("/nonexistent/model.gguf"), std::string::npos) << missing.out;

  LATTE_REQUIRE_SHARED("models/stories260K.gguf");
  auto missing_text = run_latte("tokenize " + model_arg("models/stories260K.gguf") + " -f /nonexistent/text.txt");
  EXPECT_EQ(missing_text.exit_code, 1);
  EXPECT_NE(missing_text.out.find("/nonexistent/text.txt"), std::string::npos) << missing_text.out;
}

}  // namespace test_tokenizer_cli
