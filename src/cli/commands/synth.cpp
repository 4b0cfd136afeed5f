// `latte synth --preset v2-lite --type q4_k_m -o FILE`: a synthetic DeepSeek model with the exact
// geometry of a published one and seeded random weights, for benchmarks where the real weights
// cannot be had. The file is an ordinary deepseek2 GGUF; llama.cpp-family engines also need a
// vocabulary to load it (--vocab copies one from a vocabulary GGUF).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "convert/quant_recipe.h"
#include "ggml-like/core/error.h"
#include "src/cli/commands/commands.h"
#include "src/cli/output_path.h"
#include "src/cli/flags/parse_flags.h"
#include "src/synth/synth_writer.h"

namespace latte::cli {

int cmd_synth(int argc, char** argv) {
  CLI::App app{"Write a synthetic DeepSeek GGUF: a published geometry with seeded random weights", argv[0]};
  std::string arch = "deepseek2", preset_name, type_name = "q4_0", mla_layout = "kv_b", output, vocab, name;
  int64_t layers = 0;
  uint64_t seed = 1;
  bool no_progress = false, pure = false;
  app.add_option("--arch", arch, "GGUF architecture (deepseek2)")->capture_default_str();
  app.add_option("--preset", preset_name,
                 "geometry: v2-lite (DeepSeek-V2-Lite, 15.7B), v2 (DeepSeek-V2, 236B), v3 (DeepSeek-V3, 671B), "
                 "tiny / tiny-v3 (V2-Lite / V3 flavoured, a few MiB, for tests)")
      ->required();
  app.add_option("--type", type_name, convert::file_type_help())->capture_default_str();
  app.add_flag("--pure", pure, "every 2-D/3-D weight in the type itself: no mix (output.weight too)");
  std::vector<std::string> tensor_types;
  app.add_option("--tensor-type", tensor_types,
                 "REGEX=TYPE: tensors whose name matches REGEX get TYPE instead of the mix's choice (repeatable; the "
                 "first match wins; as llama-quantize's)");
  app.add_option("--layers", layers, "keep only the first N layers (to shrink the big presets)");
  app.add_option("--mla-layout", mla_layout,
                 "attention layout: kv_b (one attn_kv_b per layer; loads in older llama.cpp versions too) or k_b "
                 "(attn_k_b + attn_v_b, as current converters write)")
      ->capture_default_str();
  app.add_option("--vocab", vocab,
                 "copy the tokenizer from this vocabulary GGUF (e.g. ggml-vocab-deepseek-llm.gguf); without it the "
                 "file has tokenizer.ggml.model = none, which latte runs on token ids but llama.cpp will not load");
  app.add_option("--name", name, "general.name (default: '<model> (synthetic)')");
  app.add_option("--seed", seed, "seed of the random weights")->capture_default_str();
  app.add_option("-o,--output", output, "output GGUF file (written atomically)")->required();
  app.add_flag("--no-progress", no_progress, "no progress bar (it is only drawn when stderr is a terminal)");
  if (const auto done = parse_flags(app, argc, argv)) return *done;

  if (arch != "deepseek2") ggl::fail("--arch '{}' is not supported (deepseek2)", arch);
  synth::SynthOptions opts;
  opts.geometry = synth::preset(preset_name);
  if (app.count("--layers")) opts.geometry = synth::with_layers(opts.geometry, layers);
  opts.file_type = convert::require_file_type(type_name, "--type");
  opts.pure = pure;
  for (const std::string& spec : tensor_types) opts.tensor_types.push_back(convert::parse_tensor_type_override(spec));
  if (mla_layout == "kv_b")
    opts.layout = convert::MlaLayout::KvB;
  else if (mla_layout == "k_b")
    opts.layout = convert::MlaLayout::KbVb;
  else
    ggl::fail("--mla-layout '{}' is not kv_b or k_b", mla_layout);
  check_output_path(output, "-o");
  opts.output_path = output;
  opts.vocab_path = vocab;
  opts.name = name;
  opts.seed = seed;
  opts.progress = !no_progress;

  const synth::SynthReport r = synth::write_synthetic_model(opts);
  fmt::print("latte synth: wrote {} ({} {} layers, {}): {:.2f}B parameters, {}; tokenizer: {}\n", output,
             opts.geometry.preset, opts.geometry.n_layer, type_name, static_cast<double>(r.n_params) / 1e9,
             convert::report_text(r.write), r.write.tokenizer.empty() ? "none" : r.write.tokenizer);
  return 0;
}

}  // namespace latte::cli
