// llama.cpp's --override-kv KEY=TYPE:VALUE: a metadata value the model is loaded with instead of
// the file's (e.g. deepseek2.expert_group_count=int:1 to route over all experts, as llama.cpp
// builds without group-limited routing do). TYPE is int, float, bool (true/false) or str.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "ggml-like/gguf/gguf.h"

namespace latte {

struct MetadataOverride {
  std::string key;
  std::string type;   // int, float, bool or str
  std::string value;  // as typed
};

// Throws ggl::Error naming the spec for a malformed one.
MetadataOverride parse_metadata_override(std::string_view spec);

// Sets each override in `file`'s metadata. Where the file has the key, an int or float value takes
// the stored value's type (an int that does not fit it is an error), and a type that does not
// match the stored one (a str for a number, ...) is an error; a new key is stored as i64, f32,
// bool or string.
void apply_metadata_overrides(ggl::GgufFile& file, const std::vector<MetadataOverride>& overrides);

}  // namespace latte
