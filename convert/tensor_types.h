// Which type each tensor is stored in, shared by `latte convert` and `latte quantize`, and the
// row-by-row encoder that turns float32 rows into that type.
//
// Rules: 1-D tensors (norms, biases, exp_probs_b) and the MoE router `ffn_gate_inp` stay F32;
// every 2-D/3-D weight gets the requested type; with a block-quantized type, a tensor whose rows
// are not a multiple of the block size (32) falls back to F16 with a notice.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ggml-like/core/types.h"

namespace latte::convert {

// The types convert and quantize produce: f32, f16, bf16, q8_0, q4_0, q4_1.
std::optional<ggl::Type> parse_output_type(std::string_view name);
std::string output_type_names();  // "f32, f16, bf16, q8_0, q4_0, q4_1"
// parse_output_type for a command-line value; `what` names the flag in the one-line error.
ggl::Type require_output_type(std::string_view name, std::string_view what);
// Help text of the --type flag of the commands that write whole models (convert, synth).
std::string weight_type_help();

// general.file_type (llama.cpp's llama_ftype) for a file whose weights are mostly `t`.
uint32_t file_type_for(ggl::Type t);

struct TypeChoice {
  ggl::Type type;
  std::string notice;  // non-empty when the tensor could not get the requested type
};

// The storage type of tensor `name` with dims `ne` (fastest-first) when `wanted` is requested.
TypeChoice choose_type(std::string_view name, const std::vector<int64_t>& ne, ggl::Type wanted);
// True for tensors that always stay F32 (1-D, and the expert router).
bool keeps_f32(std::string_view name, const std::vector<int64_t>& ne);

// Produces rows [first, first + count) of a tensor, each ne0 floats, into dst.
using RowFill = std::function<void(int64_t first, int64_t count, float* dst)>;

// Encodes `rows` rows of ne0 floats, produced by `fill` a chunk at a time, as type t into dst
// (exactly rows * row_bytes(t, ne0) bytes). Memory used: one chunk of a few MiB of floats.
void encode_rows(ggl::Type t, int64_t ne0, int64_t rows, const RowFill& fill, uint8_t* dst);

}  // namespace latte::convert
