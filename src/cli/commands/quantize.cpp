// `latte quantize IN.gguf OUT.gguf TYPE`: re-encodes a GGUF's weights as a llama.cpp file type
// (q4_k_m, q8_0, ...), with llama.cpp's per-tensor choices and flags.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "convert/quantize_gguf.h"
#include "convert/quant_recipe.h"
#include "src/cli/commands/commands.h"
#include "src/cli/output_path.h"
#include "src/cli/flags/parse_flags.h"

namespace latte::cli {

int cmd_quantize(int argc, char** argv) {
  CLI::App app{"Re-quantize a GGUF file to a llama.cpp file type: metadata kept, general.file_type updated", argv[0]};
  std::string input, output, type_name, token_embd_type, output_type;
  std::vector<std::string> tensor_types;
  convert::QuantizeOptions opts;
  bool no_progress = false;
  app.add_option("input", input, "input GGUF file")->required();
  app.add_option("output", output, "output GGUF file (written atomically)")->required();
  app.add_option("type", type_name, convert::file_type_help())->required();
  app.add_flag("--pure", opts.recipe.pure,
               "no mix: every eligible weight exactly in TYPE's base type; rows that do not fit its blocks are an "
               "error instead of a fallback");
  app.add_option("--imatrix", opts.imatrix_path,
                 "importance matrix (llama.cpp's imatrix output, GGUF or legacy .dat) for the quantizers' error "
                 "weighting");
  app.add_option("--tensor-type", tensor_types,
                 "REGEX=TYPE: tensors whose name matches REGEX get TYPE (repeatable; the first match wins)");
  app.add_option("--output-tensor-type", output_type, "type for output.weight");
  app.add_option("--token-embedding-type", token_embd_type, "type for token_embd.weight");
  app.add_flag("--leave-output-tensor", opts.leave_output_tensor, "keep output.weight as it is");
  app.add_flag("--allow-requantize", opts.allow_requantize, "allow re-quantizing tensors that are already quantized");
  app.add_flag("--no-progress", no_progress, "no progress bar (it is only drawn when stderr is a terminal)");
  if (auto done = parse_flags(app, argc, argv)) return *done;

  // Checked before any work: a bad output path would otherwise fail at the final rename, and an
  // output that is the input would silently replace it.
  check_not_input(output, input);
  check_output_path(output, "OUT");
  opts.input_path = input;
  opts.output_path = output;
  opts.file_type = convert::require_file_type(type_name, "TYPE");
  if (!token_embd_type.empty())
    opts.recipe.token_embedding_type = convert::require_tensor_type(token_embd_type, "--token-embedding-type");
  if (!output_type.empty())
    opts.recipe.output_tensor_type = convert::require_tensor_type(output_type, "--output-tensor-type");
  for (const std::string& spec : tensor_types)
    opts.recipe.tensor_types.push_back(convert::parse_tensor_type_override(spec));
  opts.progress = !no_progress;

  convert::WriteReport r = convert::quantize_gguf(opts);
  fmt::print("latte quantize: wrote {} ({}): {}\n", output, opts.file_type.name, convert::report_text(r));
  return 0;
}

}  // namespace latte::cli
