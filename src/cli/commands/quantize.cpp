// `latte quantize IN.gguf OUT.gguf TYPE`: re-encodes a GGUF's weights as a llama.cpp file type
// (q4_k_m, q8_0, ...), with llama.cpp's per-tensor choices and flags.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <sstream>

#include "convert/quantize_gguf.h"
#include "convert/quant_recipe.h"
#include "src/cli/commands/commands.h"
#include "src/cli/output_path.h"
#include "src/cli/flags/parse_flags.h"
#include "src/cli/text_input.h"

namespace latte::cli {
namespace {

// The --tensor-type specs in command-line order, --tensor-type-file's (whitespace-separated
// REGEX=TYPE, as llama-quantize reads them) in the place of that flag: the first match wins.
std::vector<std::string> tensor_type_specs(const CLI::App& app, const std::vector<std::string>& specs,
                                           const std::vector<std::string>& files) {
  std::vector<std::string> out;
  size_t next_spec = 0, next_file = 0;
  for (const CLI::Option* opt : app.parse_order()) {
    if (opt->get_name() == "--tensor-type" && next_spec < specs.size()) {
      out.push_back(specs[next_spec++]);
    } else if (opt->get_name() == "--tensor-type-file" && next_file < files.size()) {
      std::istringstream in(read_text_file(files[next_file++], "--tensor-type-file"));
      for (std::string spec; in >> spec;) out.push_back(spec);
    }
  }
  return out;
}

void print_plan(const std::vector<convert::PlannedQuantTensor>& plan) {
  uint64_t in = 0, out = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const convert::PlannedQuantTensor& t = plan[i];
    std::string shape;
    for (int64_t n : t.ne) shape += (shape.empty() ? "" : ", ") + std::to_string(n);
    fmt::print("[{:>4}/{:>4}] {:<40} [{}] {} -> {}{}, {:.2f} MiB -> {:.2f} MiB\n", i + 1, plan.size(), t.name, shape,
               ggl::type_name(t.from), ggl::type_name(t.to), t.importance ? " (imatrix)" : "",
               static_cast<double>(t.bytes_in) / (1 << 20), static_cast<double>(t.bytes_out) / (1 << 20));
    in += t.bytes_in;
    out += t.bytes_out;
  }
  fmt::print("latte quantize --dry-run: {} tensors, {:.2f} MiB -> {:.2f} MiB of tensor data; nothing written\n",
             plan.size(), static_cast<double>(in) / (1 << 20), static_cast<double>(out) / (1 << 20));
}

}  // namespace

int cmd_quantize(int argc, char** argv) {
  CLI::App app{"Re-quantize a GGUF file to a llama.cpp file type: metadata kept, general.file_type updated", argv[0]};
  std::string input, output, type_name, token_embd_type, output_type;
  std::vector<std::string> tensor_types, tensor_type_files;
  convert::QuantizeOptions opts;
  bool no_progress = false, dry_run = false;
  app.add_option("input", input, "input GGUF file")->required();
  app.add_option("output", output, "output GGUF file (written atomically)")->required();
  app.add_option("type", type_name, convert::file_type_help())->required();
  app.add_flag("--pure", opts.recipe.pure,
               "no mix: every eligible weight exactly in TYPE's base type; rows that do not fit its blocks are an "
               "error instead of a fallback");
  app.add_option("--imatrix", opts.imatrix_path,
                 "importance matrix (llama.cpp's imatrix output, GGUF or legacy .dat) for the quantizers' error "
                 "weighting");
  app.add_option("--include-weights", opts.include_weights,
                 "use the importance matrix only for tensors whose name contains this (repeatable)");
  app.add_option("--exclude-weights", opts.exclude_weights,
                 "do not use the importance matrix for tensors whose name contains this (repeatable; not with "
                 "--include-weights)");
  app.add_option("--tensor-type", tensor_types,
                 "REGEX=TYPE: tensors whose name matches REGEX get TYPE (repeatable; the first match wins)");
  app.add_option("--tensor-type-file", tensor_type_files,
                 "a file of --tensor-type specs (REGEX=TYPE, separated by spaces or lines), in this flag's place");
  app.add_flag("--dry-run", dry_run,
               "print each tensor's type and size, and the total, without quantizing or writing OUT");
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
  for (const std::string& spec : tensor_type_specs(app, tensor_types, tensor_type_files))
    opts.recipe.tensor_types.push_back(convert::parse_tensor_type_override(spec));
  opts.progress = !no_progress;
  if (dry_run) {
    print_plan(convert::plan_quantization(opts));
    return 0;
  }

  convert::WriteReport r = convert::quantize_gguf(opts);
  fmt::print("latte quantize: wrote {} ({}): {}\n", output, opts.file_type.name, convert::report_text(r));
  return 0;
}

}  // namespace latte::cli
