// `latte convert`: a Hugging Face model directory (config.json, safetensors, tokenizer files) to
// one GGUF file, streamed tensor by tensor from the memory-mapped shards and written atomically.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "convert/hf_tokenizer.h"
#include "convert/model_plan.h"
#include "convert/quant_recipe.h"
#include "ggml-like/core/types.h"

namespace latte::convert {

struct ConvertOptions {
  std::string input_dir;
  std::string output_path;
  FileType file_type = *find_file_type("f16");  // llama.cpp file type (quant_recipe.h: which tensor gets which type)
  std::optional<std::string> name;              // general.name; default: the directory's name
  MlaLayout mla_layout = MlaLayout::KbVb;
  TokenizerOptions tokenizer;
  bool progress = true;  // draw a progress bar when stderr is a terminal
  // Receives notices (tensors stored in another type, skipped tensors, ...). Default: stderr.
  std::function<void(std::string_view)> on_notice;
};

struct WriteReport {
  size_t n_tensors = 0;
  uint64_t bytes = 0;                      // tensor data written
  std::map<std::string, size_t> per_type;  // tensor count per type name
  double seconds = 0;
  uint64_t peak_rss = 0;
  std::string tokenizer;  // description, or "" for none
};

WriteReport convert_hf_checkpoint(const ConvertOptions& opts);

// "12 tensors (10 q8_0, 2 f32), 3.05 MiB in 0.21 s, peak RSS 24.1 MiB"
std::string report_text(const WriteReport& r);

}  // namespace latte::convert
