// The command line llama.cpp users already know (issue 15): llama.cpp's flag spellings accepted,
// mapped or refused with an exact one-line message; numbers, files and output paths checked
// before any work; -f/-p text conventions; the summary line; --version and help; the context
// warning. Every run uses the shipped tiny model, so each case takes milliseconds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "ggml-like/registry/backend_registry.h"
#include "src/cli/context_warning.h"
#include "src/cli/text_input.h"
#include "tests/support/test_support.h"

namespace test_cli_conventions {

namespace fs = std::filesystem;
using latte::testing::CommandResult;
using latte::testing::run_latte;
using latte::testing::run_latte_apart;
using latte::testing::shared_dir;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("latte-cli-conventions-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};
const fs::path& temp_dir() {
  static const TempDir dir;
  return dir.path;
}
fs::path write_file(const std::string& name, const std::string& text) {
  const fs::path p = temp_dir() / name;
  std::ofstream(p, std::ios::binary) << text;
  return p;
}
std::string q(const fs::path& p) { return latte::testing::shell_quoted(p); }

// stderr without the run summary line (which has timings), so notes can be compared exactly.
std::string without_summary(const std::string& err) {
  return std::regex_replace(err, std::regex("prompt: [^\n]*\n"), "");
}

// A quick greedy run; the flags under test are appended.
const std::string kRun = "run -p 'Once upon a time' -n 2 --temp 0 ";

TEST(CliConventions, LlamaCppCommandLines) {
  LATTE_REQUIRE_SHARED("models/stories260K.gguf");
  struct Case {
    std::string args;
    int exit_code;
    std::string stderr_text;  // exactly, the run summary left out
  };
  // Without a GPU the placement flags are noted ("built without CUDA", "no CUDA device (...)").
  const ggl::GpuDevices gpus = ggl::gpu_devices();
  if (!gpus.devices.empty()) GTEST_SKIP() << "a GPU is present: the placement flags offload instead of a note";
  const std::string ngl_note = ": " + gpus.why_none + ", running on the CPU\n";
  const Case cases[] = {
      // Mapped onto latte's options, silently: they mean what latte does anyway.
      {kRun + "-fa", 0, ""},
      {kRun + "-fa on", 0, ""},
      {kRun + "--flash-attn auto", 0, ""},
      {kRun + "-fa -t 1", 0, ""},  // a bare -fa before another flag (older llama.cpp)
      {kRun + "-ctk q8_0 -ctv q8_0", 0, ""},
      {kRun + "--cache-type-k bf16", 0, ""},
      {kRun + "-ub 64", 0, ""},
      {kRun + "--ubatch-size 64 -b 32", 0, ""},
      {kRun + "-no-cnv", 0, ""},
      {kRun + "--no-conversation", 0, ""},
      {kRun + "-e", 0, ""},
      {kRun + "--escape", 0, ""},
      {kRun + "-s 7", 0, ""},
      {kRun + "--seed 7", 0, ""},
      {kRun + "-ngl 0", 0, ""},
      {"run -p 'Once upon a time' --temp 0 --predict 2", 0, ""},
      {"chat -n 2 --temp 0 -sys 'Be brief.' -mli < /dev/null", 0, ""},
      {"chat -n 2 --temp 0 --multiline-input -cnv < /dev/null", 0, ""},
      // Accepted with a one-line note: this build does not do them.
      {kRun + "-ngl 99", 0, "latte run: note: -ngl 99" + ngl_note},
      {kRun + "--n-gpu-layers 99", 0, "latte run: note: --n-gpu-layers 99" + ngl_note},
      {kRun + "--gpu-layers all", 0, "latte run: note: --gpu-layers all" + ngl_note},
      {kRun + "-fa off", 0,
       "latte run: note: -fa off: latte's attention is always fused (flash-attention style); running it fused\n"},
      {kRun + "-ctk q8_0 -ctv f16", 0,
       "latte run: note: -ctv f16 differs from -ctk q8_0: latte keeps the cache in one type; using q8_0\n"},
      {kRun + "--no-mmap", 0,
       "latte run: note: --no-mmap: latte always maps the model file read-only; loading it as usual\n"},
      {kRun + "--mlock", 0,
       "latte run: note: --mlock: not supported in this build; the mapped weights may be paged out under memory "
       "pressure\n"},
      {"chat -ngl 99 -n 2 < /dev/null", 0, "latte chat: note: -ngl 99" + ngl_note},
      {"bench -p 8 -n 2 -r 1 -t 1 -ngl 99", 0, "latte bench: note: -ngl 99" + ngl_note},
      {"bench -p 8 -n 0 -r 1 -t 1 -ngl 0,99 -fa 0,1", 0,
       "latte bench: note: -ngl 0,99" + ngl_note +
           "latte bench: note: -fa 0,1: latte's attention is always fused (flash-attention style); running it fused\n"},
      {"eval -m " + q(shared_dir() / "models/stories260K.gguf") + " --tokens " + q(write_file("ids.txt", "1 2 3")) +
           " --logits-out " + q(temp_dir() / "l.f32") + " -ngl 99",
       0, "latte eval: note: -ngl 99" + ngl_note},
      // --log-disable silences notes and the summary line.
      {kRun + "-ngl 99 --log-disable", 0, ""},
      // Refused, naming the flag as typed.
      {kRun + "-ctk q4_1", 1, "latte run: error: -ctk 'q4_1' is not one of f32, f16, bf16, q8_0, q4_0\n"},
      {kRun + "--cache-type f16 -ctk q8_0", 1,
       "latte run: error: --cache-type f16 and -ctk q8_0 disagree (latte has one cache type)\n"},
      {kRun + "-ngl lots", 1, "latte run: error: -ngl 'lots' is not a layer count, auto or all\n"},
      {kRun + "-ngl 0,99", 1, "latte run: error: -ngl '0,99' is not a layer count, auto or all\n"},
      {kRun + "-fa maybe", 1, "latte run: error: -fa 'maybe' is not on, off or auto\n"},
      {kRun + "-ub 0", 1, "latte run: error: -ub must be >= 1 (got 0)\n"},
      {kRun + "-cnv", 1, "latte run: error: -cnv: latte run completes a text; for a conversation use latte chat\n"},
      {"chat -no-cnv < /dev/null", 1,
       "latte chat: error: -no-cnv: latte chat is always a conversation; for a plain completion use latte run\n"},
      {kRun + "-sys hi", 1, "latte run: error: unknown flag '-sys' (see --help)\n"},
      {kRun + "-xyz", 1, "latte run: error: unknown flag '-xyz' (see --help)\n"},
      {kRun + "--bogus-flag=3", 1, "latte run: error: unknown flag '--bogus-flag' (see --help)\n"},
      {"info -ngl 99 " + q(shared_dir() / "models/stories260K.gguf"), 1, "latte info: error: -ngl needs --plan\n"},
      {"bench --predict 2", 1, "latte bench: error: unknown flag '--predict' (see --help)\n"},
      {kRun + "extra", 1, "latte run: error: unexpected argument 'extra' (see --help)\n"},
      // Numbers: the flag as typed, the rule, the value.
      {kRun + "-c 0", 1, "latte run: error: -c must be >= 1 (got 0)\n"},
      {kRun + "--ctx-size 0", 1, "latte run: error: --ctx-size must be >= 1 (got 0)\n"},
      {kRun + "-n abc", 1, "latte run: error: -n: 'abc' is not an integer\n"},
      {kRun + "-n -2", 1, "latte run: error: -n must be >= -1 (got -2)\n"},
      {kRun + "-t -1", 1, "latte run: error: -t must be >= 0 (got -1)\n"},
      {kRun + "-t 3000000000", 1, "latte run: error: -t must be <= 2147483647 (got 3000000000)\n"},
      {kRun + "-b 1.5", 1, "latte run: error: -b: '1.5' is not an integer\n"},
      {kRun + "-c 99999999999999999999", 1, "latte run: error: -c: '99999999999999999999' is out of range\n"},
      {kRun + "--temp warm", 1, "latte run: error: --temp: 'warm' is not a number\n"},
      {kRun + "-s x", 1, "latte run: error: -s: 'x' is not an integer\n"},
      {kRun + "-c", 1, "latte run: error: -c needs a value\n"},
      {"bench -p 8,x", 1, "latte bench: error: -p: 'x' is not an integer\n"},
  };
  for (const Case& c : cases) {
    const CommandResult r = run_latte_apart(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args << "\n" << r.err;
    EXPECT_EQ(without_summary(r.err), c.stderr_text) << c.args;
  }
}

TEST(CliConventions, MappedCacheTypeAndBatchReachTheEngine) {
  // bench's JSON reports the cache type and the batch in use (llama-bench's type_k and n_batch).
  const CommandResult r = run_latte_apart("bench -p 8 -n 0 -r 1 -t 1 -o json -ctk q8_0 -ctv q8_0 -ub 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"type_k\": \"q8_0\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"n_batch\": 4"), std::string::npos) << r.out;
}

TEST(CliConventions, FilesAndOutputPathsAreCheckedFirst) {
  LATTE_REQUIRE_SHARED("models/tiny-mla-stories-f32.gguf");
  LATTE_REQUIRE_SHARED("models/tiny-mla-stories-hf");
  struct Case {
    std::string args, expect;
  };
  const fs::path dir = temp_dir() / "outdir";
  fs::create_directories(dir);
  const fs::path model = shared_dir() / "models/tiny-mla-stories-f32.gguf";
  const fs::path copy = temp_dir() / "input.gguf";
  fs::copy_file(model, copy, fs::copy_options::overwrite_existing);
  // A copy: were the check missing, convert would overwrite the checkpoint's config.json.
  const fs::path hf = temp_dir() / "hf";
  fs::copy(shared_dir() / "models/tiny-mla-stories-hf", hf,
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  const Case cases[] = {
      {"run -f " + q(dir), dir.string() + ": is a directory, not a prompt file"},
      {"run -f " + q(dir / "absent.txt"), (dir / "absent.txt").string() + ": no such prompt file"},
      {"tokenize -m " + q(model) + " -f " + q(dir), dir.string() + ": is a directory, not a text file"},
      {"run -m " + q(dir) + " -p hi", dir.string() + ": not a regular file"},
      {"quantize " + q(copy) + " " + q(copy) + " q8_0",
       copy.string() + ": the output would replace the input " + copy.string() + "; write to another file"},
      {"quantize " + q(copy) + " " + q(temp_dir() / "." / "input.gguf") + " q8_0", "would replace the input"},
      {"quantize " + q(copy) + " " + q(dir) + " q8_0", "OUT " + dir.string() + ": is a directory; give a file name"},
      {"quantize " + q(copy) + " " + q(dir / "no/such/x.gguf") + " q8_0",
       "the directory " + (dir / "no/such").string() + " does not exist"},
      {"convert " + q(hf) + " -o " + q(dir.string() + "/"),
       "-o " + dir.string() + "/: is a directory; give a file name"},
      {"convert " + q(hf) + " -o " + q(hf / "config.json"), "the output would replace the input"},
      {"synth --preset tiny -o " + q(dir), "-o " + dir.string() + ": is a directory; give a file name"},
  };
  for (const Case& c : cases) {
    const CommandResult r = run_latte(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << " -> " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.args << " -> " << r.out;
  }
  EXPECT_EQ(fs::file_size(copy), fs::file_size(model));  // the input was not touched
  EXPECT_TRUE(fs::is_empty(dir));                        // nothing was written, not even a temporary file
}

TEST(CliConventions, UnreadablePromptFileIsAnError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  const fs::path p = write_file("secret.txt", "Once upon a time");
  fs::permissions(p, fs::perms::none);
  const CommandResult r = run_latte("run -f " + q(p));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find(p.string() + ": cannot open the prompt file (Permission denied)"), std::string::npos) << r.out;
}

TEST(CliConventions, FileDropsOneTrailingNewlineLikeTheSamePromptText) {
  const std::string greedy = " -n 12 --temp 0";
  const CommandResult typed = run_latte("run -p 'Once upon a time'" + greedy, false);
  const CommandResult file = run_latte("run -f " + q(write_file("p1.txt", "Once upon a time\n")) + greedy, false);
  const CommandResult two = run_latte("run -f " + q(write_file("p2.txt", "Once upon a time\n\n")) + greedy, false);
  const CommandResult kept = run_latte("run -p 'Once upon a time\\n'" + greedy, false);
  ASSERT_EQ(typed.exit_code, 0);
  EXPECT_EQ(file.out, typed.out);
  EXPECT_EQ(two.out, kept.out);  // only one newline is dropped: the second is the prompt's
  EXPECT_NE(two.out, typed.out);
}

TEST(CliConventions, EscapesInPromptAndSystemPrompt) {
  LATTE_REQUIRE_SHARED("models/tiny-mla-stories-f32.gguf");
  const CommandResult escaped = run_latte("run -p 'Tom said:\\n\\\"Hi\\\"\\tok' --echo -n 0", false);
  const CommandResult literal = run_latte("run -p 'Tom said:\\n' --echo -n 0 --no-escape", false);
  EXPECT_EQ(escaped.out, "Tom said:\n\"Hi\"\tok\n");
  EXPECT_EQ(literal.out, "Tom said:\\n\n");
  // -sys: /stats counts the system prompt's tokens (with BOS, plain template) as the text it
  // stands for, which `latte tokenize` (no escape processing) gives from a file.
  const std::string model = q(shared_dir() / "models/tiny-mla-stories-f32.gguf");
  auto tokens = [&](const std::string& text) {
    const CommandResult ids = run_latte_apart("tokenize --bos -m " + model + " -f " + q(write_file("sys.txt", text)));
    return std::count(ids.out.begin(), ids.out.end(), ' ') + 1;
  };
  const std::string stats = " -m " + model + " < " + q(write_file("stats.txt", "/stats\n"));
  const CommandResult a = run_latte_apart("chat -sys 'The dog.\\nThe cat.'" + stats);
  const CommandResult b = run_latte_apart("chat -sys 'The dog.\\nThe cat.' --no-escape" + stats);
  EXPECT_NE(a.err.find("system prompt: " + std::to_string(tokens("The dog.\nThe cat.")) + " tokens"), std::string::npos)
      << a.err;
  EXPECT_NE(b.err.find("system prompt: " + std::to_string(tokens("The dog.\\nThe cat.")) + " tokens"),
            std::string::npos)
      << b.err;

  struct Case {
    std::string in, out;
  };
  const Case cases[] = {
      {"a\\nb", "a\nb"},      {"a\\tb", "a\tb"},  {"a\\rb", "a\rb"},    {"a\\\\nb", "a\\nb"},
      {"\\\"q\\\"", "\"q\""}, {"\\'q\\'", "'q'"}, {"\\x41\\x62", "Ab"}, {"\\x4", "\\x4"},
      {"\\xZZ", "\\xZZ"},     {"\\q", "\\q"},     {"end\\", "end\\"},   {"", ""},
  };
  for (const Case& c : cases) EXPECT_EQ(latte::cli::process_escapes(c.in), c.out) << c.in;
}

TEST(CliConventions, TextEndsWithANewlineAndTheSummaryShowsTheSeed) {
  // stdout and stderr into one pipe: the summary starts a line of its own.
  const CommandResult merged = run_latte("run -p 'Once upon a time' -n 5 --temp 1 -s 42");
  ASSERT_EQ(merged.exit_code, 0) << merged.out;
  EXPECT_NE(merged.out.find("\nprompt: 5 tokens"), std::string::npos) << merged.out;
  EXPECT_NE(merged.out.find("| seed: 42 |"), std::string::npos) << merged.out;
  // A drawn seed, shown in the summary, reproduces the text.
  const std::string sample = "run -p 'Once upon a time' -n 24 --temp 1 --top-k 0 --top-p 1 --min-p 0";
  const CommandResult first = run_latte_apart(sample);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(first.err, m, std::regex("seed: (\\d+)"))) << first.err;
  const CommandResult again = run_latte_apart(sample + " -s " + m[1].str());
  EXPECT_EQ(again.out, first.out);
}

TEST(CliConventions, ContextAboveTrainingWarnsOnce) {
  const CommandResult r = run_latte_apart("run -p 'Once upon a time' -n 2 --temp 0 -c 30000");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(without_summary(r.err),
            "latte run: warning: -c 30000 is above the model's training context of 256 tokens: text past 256 tokens "
            "will likely degrade into gibberish (the file has no rope scaling, and latte has no --rope-scaling to add "
            "one)\n");
  EXPECT_EQ(without_summary(run_latte_apart("run -p 'Once upon a time' -n 2 --temp 0 -c 256").err), "");
  EXPECT_NE(run_latte_apart("chat -c 512 < /dev/null").err.find("warning: -c 512 is above"), std::string::npos);

  latte::Hparams hp;
  hp.n_ctx_train = 163840;
  hp.rope.scaling = latte::RopeScaling::kYarn;
  hp.rope.factor = 40;
  hp.rope.original_context = 4096;
  EXPECT_EQ(latte::cli::beyond_training_warning(hp, "-c 200000", 200000),
            "-c 200000 is above the model's training context of 163840 tokens: text past 163840 tokens will likely "
            "degrade into gibberish (the file's YaRN rope scaling (factor 40 over an original 4096 tokens) is what "
            "reaches 163840 and applies as it is; latte has no --rope-scaling to stretch it further)");
  EXPECT_EQ(latte::cli::beyond_training_warning(hp, "-c 163840", 163840), "");
  hp.rope.scaling = latte::RopeScaling::kLinear;
  hp.rope.factor = 4;
  EXPECT_NE(latte::cli::beyond_training_warning(hp, "-c 200000", 200000).find("linear rope scaling (factor 4)"),
            std::string::npos);
}

TEST(CliConventions, VersionHelpAndTopLevelErrors) {
  const CommandResult version = run_latte_apart("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_TRUE(
      std::regex_match(version.out, std::regex("latte \\d+\\.\\d+\\.\\d+ \\(commit ([0-9a-f]{7,}|unknown)\\)\n")))
      << version.out;
  EXPECT_EQ(run_latte_apart("version").out, version.out);

  for (const char* cmd : {"run", "chat", "info", "bench", "quantize"}) {
    const CommandResult help = run_latte_apart(std::string("help ") + cmd);
    EXPECT_EQ(help.exit_code, 0) << cmd;
    EXPECT_EQ(help.out, run_latte_apart(std::string(cmd) + " --help").out) << cmd;
    EXPECT_NE(help.out.find(std::string("latte ") + cmd), std::string::npos) << help.out;
  }
  struct Case {
    std::string args, err;
  };
  const Case cases[] = {
      {"", "latte: error: no command given (latte --help lists them)\n"},
      {"bogus", "latte: error: unknown command 'bogus' (latte --help lists them)\n"},
      {"-ngl 99", "latte: error: unknown command '-ngl' (latte --help lists them)\n"},
      {"help bogus", "latte: error: unknown command 'bogus' (latte --help lists them)\n"},
  };
  for (const Case& c : cases) {
    const CommandResult r = run_latte_apart(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args;  // the commands' exit code for an error
    EXPECT_EQ(r.err, c.err) << c.args;
  }
}

TEST(CliConventions, InfoTakesTheModelFlagLikeEveryCommand) {
  LATTE_REQUIRE_SHARED("models/stories260K.gguf");
  const std::string file = q(shared_dir() / "models/stories260K.gguf");
  const CommandResult positional = run_latte_apart("info " + file);
  const CommandResult flag = run_latte_apart("info -m " + file);
  ASSERT_EQ(positional.exit_code, 0) << positional.err;
  EXPECT_EQ(flag.out, positional.out);
  EXPECT_EQ(run_latte_apart("info").err,
            "latte info: error: give the GGUF file: latte info FILE or latte info -m FILE\n");
}

}  // namespace test_cli_conventions
