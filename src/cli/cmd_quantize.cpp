// `latte quantize IN.gguf OUT.gguf TYPE`: re-encodes a GGUF's weights in another type.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "convert/quantize_gguf.h"
#include "convert/tensor_types.h"
#include "src/cli/commands.h"
#include "src/cli/output_path.h"
#include "src/cli/parse_flags.h"

namespace latte::cli {

int cmd_quantize(int argc, char** argv) {
  CLI::App app{"Re-quantize a GGUF file: 2-D/3-D weights to TYPE, metadata kept, general.file_type updated",
               argv[0]};
  std::string input, output, type_name, token_embd_type;
  convert::QuantizeOptions opts;
  bool no_progress = false;
  app.add_option("input", input, "input GGUF file")->required();
  app.add_option("output", output, "output GGUF file (written atomically)")->required();
  app.add_option("type", type_name, "weight type: " + convert::output_type_names())->required();
  app.add_flag("--pure", opts.pure,
               "every eligible weight exactly in TYPE: rows that do not fit its block size are an error instead of "
               "falling back to f16");
  app.add_flag("--leave-output-tensor", opts.leave_output_tensor, "keep output.weight as it is");
  app.add_option("--token-embedding-type", token_embd_type, "type for token_embd.weight");
  app.add_flag("--allow-requantize", opts.allow_requantize, "allow re-quantizing tensors that are already quantized");
  app.add_flag("--no-progress", no_progress, "no progress bar (it is only drawn when stderr is a terminal)");
  if (auto done = parse_flags(app, argc, argv)) return *done;

  // Checked before any work: a bad output path would otherwise fail at the final rename, and an
  // output that is the input would silently replace it.
  check_not_input(output, input);
  check_output_path(output, "OUT");
  opts.input_path = input;
  opts.output_path = output;
  opts.type = convert::require_output_type(type_name, "TYPE");
  if (!token_embd_type.empty())
    opts.token_embedding_type = convert::require_output_type(token_embd_type, "--token-embedding-type");
  opts.progress = !no_progress;

  convert::WriteReport r = convert::quantize_gguf(opts);
  fmt::print("latte quantize: wrote {} ({}): {}\n", output, type_name, convert::report_text(r));
  return 0;
}

}  // namespace latte::cli
