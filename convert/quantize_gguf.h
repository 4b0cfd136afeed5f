// `latte quantize`: re-encodes the weights of a GGUF file in another type, keeping its metadata
// (general.file_type updated) and tensor order. Tensor rules are those of `latte convert`
// (tensor_types.h); the quantizer is the reference one (ggml-like/quant/quant.h), so quantizing an F32
// file reproduces other tools' reference-quantized files byte for byte.
#pragma once
#include <optional>
#include <string>

#include "convert/convert_hf.h"
#include "ggml-like/core/types.h"

namespace latte::convert {

struct QuantizeOptions {
  std::string input_path;
  std::string output_path;
  ggl::Type type = ggl::Type::Q8_0;
  // Every eligible weight exactly in `type`: a tensor whose rows do not fit the type's block size
  // is an error instead of falling back to F16.
  bool pure = false;
  bool leave_output_tensor = false;              // output.weight keeps its type and bytes
  std::optional<ggl::Type> token_embedding_type; // type for token_embd.weight
  bool allow_requantize = false;                 // permit re-quantizing already quantized tensors
  bool progress = true;
  std::function<void(std::string_view)> on_notice;  // default: stderr
};

WriteReport quantize_gguf(const QuantizeOptions& opts);

}  // namespace latte::convert
