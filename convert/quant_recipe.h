// Which type each tensor of a model is stored in: llama.cpp's file types (llama_ftype) and the
// per-tensor choices its quantizer makes for them (src/llama-quant.cpp, llama_tensor_get_type),
// shared by `latte quantize`, `latte convert` and `latte synth`.
//
// A file type names a base type for most weights; the K-quant "mixes" (q3_k_m, q4_k_m, ...) give
// some tensors more bits: output.weight (Q6_K), attn_v in some layers, ffn_down* in the layers
// use_more_bits picks; the i-quant mixes (iq1_s ... iq3_m) keep output, token_embd, attn_v,
// attn_output and a few ffn_down at 2 to 6 bits, and iq3_xs puts the middle layers' ffn_gate / ffn_up
// in IQ3_XXS. Tensors whose rows do not divide into the chosen type's blocks fall back (Q4_K -> Q5_0,
// Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K/IQ4_XS and the IQ1-IQ3 types -> IQ4_NL, else F16, with a
// notice).
// 1-D tensors and the expert router stay F32.
//
// The choices reproduce the reference quantizer that made ../shared/fixtures/kquant (in it,
// DeepSeek's attn_kv_b counts as an attention-V tensor but is not given more bits, and attn_k_b /
// attn_v_b are ordinary weights).
#pragma once
#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "ggml-like/core/types.h"
#include "ggml-like/gguf/gguf.h"

namespace latte::convert {

struct FileType {
  std::string_view name;  // llama.cpp's name, lower case: "q4_k_m"
  uint32_t id;            // general.file_type (LLAMA_FTYPE_*)
  ggl::Type base;         // the type of most weights
};

// Case-insensitive ("Q4_K_M" and "q4_k_m"); std::nullopt if latte does not write that file type.
std::optional<FileType> find_file_type(std::string_view name);
// find_file_type for a command-line value; `what` names the flag in the one-line error.
FileType require_file_type(std::string_view name, std::string_view what);
std::string file_type_names();  // "f32, f16, bf16, q8_0, q4_0, ..."
// Help text of the --type flag of the commands that write whole models (convert, synth).
std::string file_type_help();
// The file type whose base is t without a mix (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1,
// q6_k, iq4_nl), for general.file_type of files written in one type.
std::optional<FileType> file_type_of_base(ggl::Type t);

// A tensor type for --tensor-type, --output-tensor-type, --token-embedding-type (the types latte
// writes); `what` names the flag in the one-line error.
ggl::Type require_tensor_type(std::string_view name, std::string_view what);

// What the recipes need to know about the model (llama.cpp reads the same hyperparameters).
struct RecipeModel {
  std::string arch;      // general.architecture
  int64_t n_layer = 0;   // <arch>.block_count (0: unknown, counted from the tensor names)
  int64_t n_expert = 0;  // <arch>.expert_count (0: dense)
  int64_t n_head = 1, n_head_kv = 1;

  // Reads the keys above; errors name `path`.
  static RecipeModel from_metadata(const ggl::Metadata& md, std::string_view path);
};

// --tensor-type REGEX=TYPE: tensors whose name matches REGEX (searched, lower-cased as llama.cpp
// does) get TYPE instead of the mix's choice; the first matching override wins.
struct TensorTypeOverride {
  std::string pattern;
  std::regex regex;
  ggl::Type type;
};
TensorTypeOverride parse_tensor_type_override(std::string_view spec);

struct RecipeOptions {
  // No mix: every quantizable weight in the base type, and a tensor whose rows do not fit the
  // type is an error instead of a fallback.
  bool pure = false;
  std::optional<ggl::Type> output_tensor_type;    // output.weight, exactly this type
  std::optional<ggl::Type> token_embedding_type;  // token_embd.weight, exactly this type
  std::vector<TensorTypeOverride> tensor_types;
  bool has_imatrix = false;  // some mixes differ when an importance matrix is used
};

struct RecipeTensor {
  std::string name;
  std::vector<int64_t> ne;  // fastest-first
  // False: the tensor is copied as it is (--leave-output-tensor, integer tensors); it still
  // counts for the recipe (an output.weight means token_embd is not tied to it).
  bool quantize = true;
};

struct TensorTypeChoice {
  ggl::Type type;
  std::string notice;  // non-empty when the tensor fell back to another type
};

// The type of every tensor (same order as `tensors`; entries with quantize == false are
// unspecified). Tensors are visited in llama.cpp's order (by layer, then name), which its
// per-layer counters depend on. Throws ggl::Error for --pure / explicit types that do not fit.
std::vector<TensorTypeChoice> choose_tensor_types(const FileType& ft, const RecipeModel& model,
                                                  const std::vector<RecipeTensor>& tensors, const RecipeOptions& opts);

// Refuses, before anything is written, a plan this build cannot write: a chosen type without a
// quantizer here, or (without an importance matrix) a type needs_importance names. With an
// importance matrix, tensors it lacks are the writer's to check.
void check_writable(const std::vector<TensorTypeChoice>& choices, const std::vector<RecipeTensor>& tensors,
                    bool has_imatrix);

// True where llama.cpp refuses to quantize a tensor to t without an importance matrix entry for
// it ("the result will be garbage"): IQ1_S, IQ2_XXS, IQ2_XS and IQ2_S, and IQ1_M but for
// token_embd.weight and output.weight.
bool needs_importance(ggl::Type t, std::string_view tensor_name);

// True for tensors that always stay F32 (1-D, and the expert router).
bool keeps_f32(std::string_view name, const std::vector<int64_t>& ne);

}  // namespace latte::convert
