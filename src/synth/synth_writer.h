// `latte synth`: writes a synthetic deepseek2 GGUF (a preset geometry, seeded random weights) in
// any file type, streamed tensor by tensor through GgufWriter: memory stays near the largest
// tensor, and the file appears atomically when complete.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "convert/convert_hf.h"
#include "convert/model_plan.h"
#include "convert/quant_recipe.h"
#include "ggml-like/gguf/gguf.h"
#include "src/synth/geometry.h"

namespace latte::synth {

struct SynthOptions {
  Geometry geometry;
  // llama.cpp file type, with its per-tensor choices (quant_recipe.h); norms, biases and the router stay f32.
  convert::FileType file_type = *convert::find_file_type("q4_0");
  bool pure = false;                                      // every 2-D/3-D weight in the file type's base type (no mix)
  std::vector<convert::TensorTypeOverride> tensor_types;  // --tensor-type REGEX=TYPE, first match wins
  convert::MlaLayout layout = convert::MlaLayout::KvB;
  std::string output_path;
  std::string vocab_path;  // a GGUF whose tokenizer.* keys are copied; "" for none
  std::string name;        // general.name; "" for "<title> (synthetic)"
  uint64_t seed = 1;
  bool progress = true;  // a progress bar when stderr is a terminal
  // Receives notices (a tensor stored in another type). Default: stderr.
  std::function<void(std::string_view)> on_notice;
};

struct SynthReport {
  convert::WriteReport write;  // tensors, bytes, seconds, peak RSS, tokenizer description
  int64_t n_params = 0;
};

SynthReport write_synthetic_model(const SynthOptions& opts);

// Copies every tokenizer.* key of the GGUF at `path` into md and returns a description
// ("gpt2/deepseek-llm, 102400 tokens"). Throws ggl::Error("PATH: ...") when the file has no
// tokenizer or its token count is not n_vocab.
std::string copy_tokenizer(const std::string& path, int64_t n_vocab, ggl::Metadata& md);

}  // namespace latte::synth
