// `latte imatrix`: an importance matrix for quantization (`latte quantize --imatrix`) from a
// model's activations over a text, as llama-imatrix computes it (src/eval/imatrix_collector.h),
// in llama.cpp's GGUF format or its legacy .dat; --in-file merges earlier files.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
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
#include "src/eval/imatrix_collector.h"
#include "src/eval/perplexity.h"

namespace latte::cli {
namespace {

// gguf unless --output-format says otherwise or the output's name ends in .dat.
bool legacy_output(const std::string& format, const std::string& out) {
  if (format.empty()) return out.ends_with(".dat");
  return format == "dat";
}

}  // namespace

int cmd_imatrix(int argc, char** argv) {
  CLI::App app{
      "An importance matrix for quantization, as llama-imatrix computes it: the squared activations entering each "
      "weight matrix (per expert for routed experts), summed over a text evaluated in chunks of -c tokens. "
      "Use it with `latte quantize --imatrix FILE`.",
      argv[0]};
  std::string model_path, text_path, out_path = "imatrix.gguf", format;
  std::vector<std::string> in_files;
  int64_t max_chunks = -1, first_chunk = 0, output_frequency = 10, save_frequency = 0;
  bool process_output = false, no_ppl = false, no_progress = false;
  SessionFlags flags;
  app.add_option("-m,--model", model_path, "GGUF model (needed with -f)");
  app.add_option("-f,--file", text_path, "the text (its last newline dropped, as llama.cpp does)");
  app.add_option("-o,--output,--output-file", out_path, "where to write (default imatrix.gguf)");
  app.add_option("--output-format", format,
                 "gguf (llama.cpp's current format) or dat (the legacy one); default: "
                 "gguf unless -o ends in .dat")
      ->check(CLI::IsMember({"gguf", "dat"}));
  app.add_option("--in-file", in_files, "an importance matrix to add to (repeatable; GGUF or .dat)");
  app.add_option("--chunks", max_chunks, "evaluate at most N chunks (default: all the text gives)")->check(integer(1));
  app.add_option("--chunk", first_chunk, "start from chunk N: the text's first N chunks are left out (default 0)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--output-frequency", output_frequency,
                 "write the importance matrix so far to -o every N chunks (default 10), and at the end")
      ->check(integer(1));
  app.add_option("--save-frequency", save_frequency,
                 "also keep a copy every N chunks, as OUTPUT.at_<chunks> (default 0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--process-output", process_output, "also collect for the output head (output.weight)");
  app.add_flag("--no-ppl", no_ppl, "do not compute the perplexity of the chunks");
  app.add_flag("--no-progress", no_progress, "no progress bar (drawn on stderr only when stdout is not a terminal)");
  flags.add_to(app);
  app.footer(
      "-c defaults to 512 tokens (llama-imatrix's); a text needs at least 2 * c tokens. Each chunk is "
      "evaluated in graphs of -b tokens (llama-imatrix's -ub). MLA models run in the naive form with an f32 "
      "cache, so attn_kv_b multiplies the latents as in llama.cpp; it runs on the CPU (placement flags are ignored).");
  if (auto done = parse_flags(app, argc, argv)) return *done;
  if (text_path.empty() && in_files.empty()) ggl::fail("give a text with -f FILE (or --in-file files to combine)");
  if (!text_path.empty() && model_path.empty()) ggl::fail("-f needs the model: -m MODEL");
  check_output_path(out_path, "-o");
  for (const std::string& in : in_files) check_not_input(out_path, in);
  if (!text_path.empty()) check_not_input(out_path, text_path);

  eval::ImatrixCollector collector(process_output);
  for (const std::string& in : in_files) collector.sums().merge(eval::ImatrixSums::load(in));
  const bool legacy = legacy_output(format, out_path);
  auto write = [&](const std::string& path) {
    return legacy ? collector.sums().write_legacy(path) : collector.sums().write_gguf(path);
  };

  if (!text_path.empty()) {
    const Model model(model_path, flags.model_options(model_path));
    const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_gguf(model.file());
    const auto [tokens, n_ctx, n_chunk] = chunk_text_file(*tokenizer, text_path, flags, max_chunks, first_chunk);
    SessionOptions options = chunk_session_options(flags, n_ctx);
    options.cache_type = ggl::Type::F32;
    options.mla_mode = MlaMode::kNaive;
    // The collector reads the activations from the graph it is given, which a scheduler over a
    // device would cut into parts of its own: the whole pass stays on the CPU.
    options.placement.reset();
    collector.attach(options);
    collector.sums().datasets.push_back(text_path);  // before the chunks: the files written on the way name it too
    flags.warn_beyond_training(model.hparams(), n_ctx);
    Session session(model, options);
    flags.note_offload(session);

    std::fprintf(stderr, "imatrix: %zu tokens; computing over %lld chunks, n_ctx=%lld, batch_size=%lld\n",
                 tokens.size(), static_cast<long long>(n_chunk), static_cast<long long>(n_ctx),
                 static_cast<long long>(options.n_batch));
    eval::ChunkProgress bar(n_chunk, !no_progress);
    const int64_t last_chunk = n_chunk;  // (clang < 16 does not let a lambda capture a structured binding)
    const eval::NllSums nll = eval::collect_imatrix(session, tokens,
                                                    {.n_ctx = n_ctx,
                                                     .n_chunk = n_chunk,
                                                     .n_batch = options.n_batch,
                                                     .bos = eval::chunk_bos(*tokenizer),
                                                     .perplexity = !no_ppl,
                                                     .on_chunk =
                                                         [&](int64_t chunk, const eval::NllSums& s) {
                                                           bar.chunk_done(chunk, no_ppl ? 0.0 : s.ppl());
                                                           if (!no_ppl)
                                                             print_now(fmt::format("[{}]{:.4f},", chunk, s.ppl()));
                                                           // As llama-imatrix: the file so far, and copies.
                                                           if (chunk % output_frequency == 0 && chunk < last_chunk)
                                                             write(out_path);
                                                           if (save_frequency > 0 && chunk % save_frequency == 0)
                                                             write(fmt::format("{}.at_{}", out_path, chunk));
                                                         }},
                                                    collector);
    bar.finish();
    if (!no_ppl) print_now(fmt::format("\nFinal estimate: PPL = {:.4f} +/- {:.5f}\n", nll.ppl(), nll.ppl_error()));
  }

  const eval::ImatrixSums& sums = collector.sums();
  const eval::ImatrixWriteReport report = write(out_path);
  for (const std::string& s : report.skipped) std::fprintf(stderr, "imatrix: not written: %s\n", s.c_str());
  std::fprintf(stderr, "imatrix: wrote %lld entries (%lld chunks) to %s (%s)\n", static_cast<long long>(report.written),
               static_cast<long long>(sums.chunks), out_path.c_str(), legacy ? "legacy .dat" : "GGUF");
  return 0;
}

}  // namespace latte::cli
