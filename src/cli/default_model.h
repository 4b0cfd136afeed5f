// The model used when a command gets no -m: the tiny MLA story model shipped in models/.
#pragma once
#include <string>

namespace latte::cli {

inline constexpr const char* kDefaultModelFile = "tiny-mla-stories-f32.gguf";

// Looks for models/<kDefaultModelFile> next to the binary's checkout (build/bin/../../models), in
// an installed tree (PREFIX/bin/../share/latte/models, see `make install`), then in the source
// tree the binary was built from. Throws ggl::Error saying where it looked.
std::string default_model_path();

}  // namespace latte::cli
