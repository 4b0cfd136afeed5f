// `latte quantize`: re-encodes the weights of a GGUF file as a llama.cpp file type, keeping its
// metadata (general.file_type updated) and tensor order. Which tensor gets which type is the
// recipe's choice (quant_recipe.h); the quantizers are the reference ones
// (ggml-like/quant/quant.h), so quantizing an F32 file reproduces llama.cpp's files byte for byte.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "convert/convert_hf.h"
#include "convert/quant_recipe.h"
#include "convert/tensor_types.h"

namespace latte::convert {

struct QuantizeOptions {
  std::string input_path;
  std::string output_path;
  FileType file_type = *find_file_type("q8_0");
  RecipeOptions recipe;              // --pure, --output-tensor-type, ... (has_imatrix is set here)
  bool leave_output_tensor = false;  // output.weight keeps its type and bytes
  bool allow_requantize = false;     // permit re-quantizing already quantized tensors
  // An importance matrix (GGUF or legacy .dat) whose per-column weights reach the quantizers;
  // its entries must name tensors of this model with matching sizes.
  std::string imatrix_path;
  // llama-quantize's --include-weights / --exclude-weights: the importance matrix's entries whose
  // tensor name contains one of these strings are the only ones used / not used.
  std::vector<std::string> include_weights, exclude_weights;
  RowQuantizer quantizer;  // default: the reference quantizers
  bool progress = true;
  std::function<void(std::string_view)> on_notice;  // default: stderr
};

WriteReport quantize_gguf(const QuantizeOptions& opts);

// One tensor of a --dry-run's plan.
struct PlannedQuantTensor {
  std::string name;
  std::vector<int64_t> ne;
  ggl::Type from, to;  // to == from: copied as it is
  uint64_t bytes_in, bytes_out;
  bool importance;  // an importance matrix entry reaches its quantizer, which uses it
};

// What quantize_gguf would write, decided and checked as it does (the same refusals), without
// quantizing or writing anything; notices go to on_notice.
std::vector<PlannedQuantTensor> plan_quantization(const QuantizeOptions& opts);

}  // namespace latte::convert
