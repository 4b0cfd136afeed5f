// `latte info FILE`: a compact, human-readable description of a GGUF file.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "ggml-like/gguf.h"
#include "src/cli/commands.h"

namespace latte::cli {

int cmd_info(int argc, char** argv) {
  CLI::App app{"Describe a GGUF file", argv[0]};
  std::string path;
  bool list_tensors = false;
  app.add_option("file", path, "GGUF file")->required();
  app.add_flag("--tensors", list_tensors, "list every tensor with type and shape");
  CLI11_PARSE(app, argc, argv);

  ggl::GgufFile file(path);
  fmt::print("{}: GGUF v{}, {} tensors, {} metadata keys\n", path, file.version(), file.tensors().size(),
             file.metadata().entries().size());
  if (list_tensors)
    for (const auto& t : file.tensors())
      fmt::print("  {:<40} {:<5} [{}]\n", t.name, ggl::type_name(t.type),
                 fmt::join(std::vector<int64_t>(t.ne, t.ne + t.n_dims), ", "));
  return 0;
}

}  // namespace latte::cli
