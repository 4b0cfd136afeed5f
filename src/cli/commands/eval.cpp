// `latte eval`: evaluate given token ids and write the logits of every position, for comparing
// the forward pass with a reference engine. Prints nothing but errors.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <sstream>
#include <memory>
#include <string>
#include <vector>

#include "ggml-like/core/error.h"
#include "src/cli/commands/commands.h"
#include "src/cli/flags/flag_checks.h"
#include "src/cli/output_path.h"
#include "src/cli/flags/parse_flags.h"
#include "src/cli/flags/session_flags.h"
#include "src/cli/text_input.h"
#include "src/runtime/session.h"
#include "src/parallel/job.h"

namespace latte::cli {
namespace {

std::vector<int32_t> read_tokens(const std::string& path) {
  std::istringstream in(read_text_file(path, "token file"));
  std::vector<int32_t> ids;
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long id = 0;
    try {
      id = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || id < INT32_MIN || id > INT32_MAX)
      ggl::fail("{}: '{}' (token {}) is not a token id", path, word, ids.size());
    ids.push_back(static_cast<int32_t>(id));
  }
  if (ids.empty()) ggl::fail("{}: no token ids", path);
  return ids;
}

void write_logits(const std::string& path, const std::vector<float>& logits) {
  std::unique_ptr<FILE, int (*)(FILE*)> out(std::fopen(path.c_str(), "wb"), std::fclose);
  if (!out) ggl::fail("{}: cannot write the logits ({})", path, std::strerror(errno));
  if (std::fwrite(logits.data(), sizeof(float), logits.size(), out.get()) != logits.size() ||
      std::fflush(out.get()) != 0)
    ggl::fail("{}: writing the logits failed ({})", path, std::strerror(errno));
}

}  // namespace

int cmd_eval(int argc, char** argv) {
  CLI::App app{
      "Evaluate token ids with a model and write the logits of every position as float32\n"
      "little-endian [n_tokens][n_vocab]. Exactly the given ids are evaluated (no BOS added).",
      argv[0]};
  std::string model_path, tokens_path, out_path;
  int64_t decode_from = -1;
  SessionFlags flags;
  app.add_option("-m,--model", model_path, "GGUF model (llama or deepseek2)")->required();
  app.add_option("--tokens", tokens_path, "file of whitespace-separated token ids")->required();
  app.add_option("--logits-out", out_path, "where to write the logits")->required();
  app.add_option("--decode-from", decode_from,
                 "evaluate tokens [0, K) as a (chunked) prefill, the rest one token at a time through the cache")
      ->check(integer(0));
  flags.add_to(app);
  app.footer(
      "Without -c the context is min(4096, the model's training context), raised to the token count when that is "
      "larger but within the training context. --batch N evaluates the prefill in chunks of at most N tokens.");
  if (auto done = parse_flags(app, argc, argv)) return *done;

  SessionOptions options = flags.options();
  check_output_path(out_path, "--logits-out");
  const std::vector<int32_t> tokens = read_tokens(tokens_path);
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (decode_from > n) ggl::fail("--decode-from {} is beyond the {} tokens", decode_from, n);

  const Model model(model_path, flags.model_options(model_path));
  const Hparams& hp = model.hparams();
  if (options.n_ctx == 0) {
    options.n_ctx = std::max(default_context(hp), n);
    if (n > hp.n_ctx_train)
      ggl::fail("{} tokens exceed the model's training context of {} (pass -c to use a larger context)", n,
                hp.n_ctx_train);
  }
  if (n > options.n_ctx) ggl::fail("{} tokens exceed the context of {} tokens", n, options.n_ctx);
  flags.warn_beyond_training(hp, options.n_ctx);

  Session session(model, options);
  flags.note_offload(session);

  const std::span<const int32_t> all(tokens);
  const int64_t prefill = decode_from < 0 ? n : decode_from;
  std::vector<float> logits = session.eval(all.first(prefill));
  logits.reserve(static_cast<size_t>(n * hp.n_vocab));
  for (int64_t i = prefill; i < n; ++i) {
    const std::vector<float> step = session.eval(all.subspan(i, 1));
    logits.insert(logits.end(), step.begin(), step.end());
  }
  if (Job::get().rank() == 0) write_logits(out_path, logits);  // under mpirun, the ranks computed the same
  return 0;
}

}  // namespace latte::cli
