// `latte perplexity`: a model's perplexity over a text, chunked and scored as llama-perplexity
// does (src/eval/perplexity.h); with --kl-divergence-base it also saves the base's
// log-probabilities, with --kl-divergence it compares a model against such a file.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "ggml-like/core/error.h"
#include "src/cli/commands/commands.h"
#include "src/cli/eval_text.h"
#include "src/cli/flags/flag_checks.h"
#include "src/cli/flags/parse_flags.h"
#include "src/cli/flags/session_flags.h"
#include "src/cli/output_path.h"
#include "src/eval/chunk_progress.h"
#include "src/eval/kl_base_file.h"
#include "src/eval/kl_report.h"
#include "src/eval/perplexity.h"
#include "src/parallel/job.h"

namespace latte::cli {
namespace {

// --kl-divergence: the base file's chunks against this model.
int kl_divergence_run(const std::string& model_path, const std::string& base_path, const std::string& text_path,
                      int64_t max_chunks, bool progress_bar, const SessionFlags& flags) {
  eval::KlBaseReader base(base_path);
  const eval::KlBaseHeader& h = base.header();
  if (flags.n_ctx != 0 && flags.n_ctx != h.n_ctx)
    ggl::fail("{} was computed with -c {}; give the same context (or none)", base_path, h.n_ctx);
  const Model model(model_path, flags.model_options(model_path));
  if (h.n_vocab != model.hparams().n_vocab)
    ggl::fail("{} holds log-probabilities over {} tokens, the model's vocabulary has {}", base_path, h.n_vocab,
              model.hparams().n_vocab);
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_gguf(model.file());
  if (!text_path.empty()) {  // optional: that the file was made from this text
    const std::vector<int32_t> tokens = text_file_tokens(*tokenizer, text_path);
    if (tokens.size() < h.tokens.size() || !std::equal(h.tokens.begin(), h.tokens.end(), tokens.begin()))
      ggl::fail("{} was computed from another text than {} (its tokens differ)", base_path, text_path);
  }
  const SessionOptions options = chunk_session_options(flags, h.n_ctx);
  flags.warn_beyond_training(model.hparams(), h.n_ctx);
  Session session(model, options);
  flags.note_offload(session);

  const int64_t n_chunk = max_chunks > 0 ? std::min(max_chunks, h.n_chunk) : h.n_chunk;
  std::fprintf(stderr, "kl_divergence: %lld chunks of %lld tokens from %s, batch_size=%lld\n",
               static_cast<long long>(n_chunk), static_cast<long long>(h.n_ctx), base_path.c_str(),
               static_cast<long long>(options.n_batch));
  eval::ChunkProgress bar(n_chunk, progress_bar);
  print_now(eval::kl_table_header());
  eval::KlResult r = eval::kl_divergence(session, base, eval::chunk_bos(*tokenizer), max_chunks,
                                         [&](int64_t chunk, int64_t, const eval::KlSums& sums) {
                                           bar.chunk_done(chunk, std::exp(sums.nll / static_cast<double>(sums.count)));
                                           print_now(eval::kl_table_row(chunk, sums));
                                         });
  bar.finish();
  print_now("\n" + eval::kl_summary(r));
  return 0;
}

}  // namespace

int cmd_perplexity(int argc, char** argv) {
  CLI::App app{
      "A model's perplexity over a text, as llama-perplexity measures it: the text's tokens in chunks of -c tokens, "
      "each evaluated from an empty cache with BOS first, the second half of each chunk scored. Prints the running "
      "estimate per chunk and the final PPL with its uncertainty.",
      argv[0]};
  std::string model_path, text_path, base_path;
  int64_t max_chunks = -1;
  bool kl = false, no_progress = false;
  SessionFlags flags;
  app.add_option("-m,--model", model_path, "GGUF model")->required();
  app.add_option("-f,--file", text_path, "the text (its last newline dropped, as llama.cpp does)");
  app.add_option("--chunks", max_chunks, "evaluate at most N chunks (default: all the text gives)")->check(integer(1));
  app.add_option("--kl-divergence-base,--save-all-logits", base_path,
                 "without --kl-divergence: also save the log-probabilities to FILE (llama.cpp's format); with it: "
                 "the base file to compare against");
  app.add_flag("--kl-divergence", kl,
               "compare this model with the base file of --kl-divergence-base: KL divergence, top token agreement, "
               "PPL ratio (-f is then optional: when given, the file must come from that text)");
  app.add_flag("--no-progress", no_progress, "no progress bar (drawn on stderr only when stdout is not a terminal)");
  flags.add_to(app);
  app.footer(
      "-c defaults to 512 tokens (llama-perplexity's); a text needs at least 2 * c tokens. -b splits each "
      "chunk into graphs of at most that many tokens.");
  if (auto done = parse_flags(app, argc, argv)) return *done;

  if (kl) {
    if (base_path.empty()) ggl::fail("--kl-divergence needs the base file: --kl-divergence-base FILE");
    return kl_divergence_run(model_path, base_path, text_path, max_chunks, !no_progress, flags);
  }
  if (text_path.empty()) ggl::fail("give the text with -f FILE");
  if (!base_path.empty()) {
    check_output_path(base_path, "--kl-divergence-base");
    check_not_input(base_path, text_path);
    check_not_input(base_path, model_path);
  }
  const Model model(model_path, flags.model_options(model_path));
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_gguf(model.file());
  const auto [tokens, n_ctx, n_chunk] = chunk_text_file(*tokenizer, text_path, flags, max_chunks);
  const SessionOptions options = chunk_session_options(flags, n_ctx);
  flags.warn_beyond_training(model.hparams(), n_ctx);
  Session session(model, options);
  flags.note_offload(session);

  std::unique_ptr<eval::KlBaseWriter> base;
  const bool rank0 = Job::get().rank() == 0;  // under mpirun, the ranks compute the same: rank 0 writes
  if (!base_path.empty() && rank0) {
    eval::KlBaseHeader h{n_ctx, session.n_vocab(), n_chunk,
                         std::vector<int32_t>(tokens.begin(), tokens.begin() + n_chunk * n_ctx)};
    base = std::make_unique<eval::KlBaseWriter>(base_path, h);
  }
  if (rank0)
    std::fprintf(stderr,
                 "perplexity: %zu tokens; calculating perplexity over %lld chunks, n_ctx=%lld, batch_size=%lld\n",
                 tokens.size(), static_cast<long long>(n_chunk), static_cast<long long>(n_ctx),
                 static_cast<long long>(options.n_batch));
  eval::ChunkProgress bar(n_chunk, !no_progress && rank0);
  const eval::NllSums sums = eval::perplexity(session, tokens,
                                              {.n_ctx = n_ctx,
                                               .n_chunk = n_chunk,
                                               .bos = eval::chunk_bos(*tokenizer),
                                               .base = base.get(),
                                               .on_chunk = [&](int64_t chunk, const eval::NllSums& s) {
                                                 bar.chunk_done(chunk, s.ppl());
                                                 print_now(fmt::format("[{}]{:.4f},", chunk, s.ppl()));
                                               }});
  bar.finish();
  if (base) base->close();
  print_now(fmt::format("\nFinal estimate: PPL = {:.4f} +/- {:.5f}\n", sums.ppl(), sums.ppl_error()));
  if (base) std::fprintf(stderr, "perplexity: saved the log-probabilities to %s\n", base_path.c_str());
  return 0;
}

}  // namespace latte::cli
