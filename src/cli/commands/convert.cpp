// `latte convert HF_DIR -o OUT.gguf`: a Hugging Face checkpoint directory to a GGUF file.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>

#include "convert/convert_hf.h"
#include "convert/quant_recipe.h"
#include "src/cli/commands/commands.h"
#include "src/cli/output_path.h"
#include "src/cli/flags/parse_flags.h"

namespace latte::cli {
namespace {

// The output must not replace a file the conversion reads (config.json, tokenizer files, the
// safetensors shards); other files in the checkpoint directory, such as an earlier .gguf, may be.
void check_not_checkpoint_file(const std::string& output, const std::string& input_dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(input_dir, ec)) {
    const std::string ext = entry.path().extension().string();
    if (ext == ".json" || ext == ".safetensors") check_not_input(output, entry.path().string());
  }
}

}  // namespace

int cmd_convert(int argc, char** argv) {
  CLI::App app{"Convert a Hugging Face model directory (config.json, *.safetensors, tokenizer.json) to GGUF", argv[0]};
  std::string input, output, type_name = "f16", name, mla_layout = "k_b", tokenizer_pre;
  bool no_progress = false;
  app.add_option("model_dir", input, "Hugging Face model directory")->required();
  app.add_option("-o,--output", output, "output GGUF file (written atomically)")->required();
  app.add_option("--type", type_name, convert::file_type_help())->capture_default_str();
  app.add_option("--name", name, "general.name (default: the directory's name)");
  app.add_option("--mla-layout", mla_layout,
                 "DeepSeek attention layout: k_b (attn_k_b + attn_v_b, current) or kv_b (one attn_kv_b, older)")
      ->capture_default_str();
  app.add_option("--tokenizer-pre", tokenizer_pre,
                 "tokenizer.ggml.pre for byte-level BPE tokenizers whose pre-tokenizer is not recognised");
  app.add_flag("--no-progress", no_progress, "no progress bar (it is only drawn when stderr is a terminal)");
  if (auto done = parse_flags(app, argc, argv)) return *done;

  check_not_checkpoint_file(output, input);
  check_output_path(output, "-o");
  convert::ConvertOptions opts;
  opts.input_dir = input;
  opts.output_path = output;
  opts.file_type = convert::require_file_type(type_name, "--type");
  if (!name.empty()) opts.name = name;
  if (mla_layout == "k_b")
    opts.mla_layout = convert::MlaLayout::KbVb;
  else if (mla_layout == "kv_b")
    opts.mla_layout = convert::MlaLayout::KvB;
  else
    ggl::fail("--mla-layout '{}' is not k_b or kv_b", mla_layout);
  if (!tokenizer_pre.empty()) opts.tokenizer.pre = tokenizer_pre;
  opts.progress = !no_progress;

  convert::WriteReport r = convert::convert_hf_checkpoint(opts);
  fmt::print("latte convert: wrote {} ({}): {}; tokenizer: {}\n", output, type_name, convert::report_text(r),
             r.tokenizer.empty() ? "none" : r.tokenizer);
  return 0;
}

}  // namespace latte::cli
