#include "src/cli/output_path.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ggml-like/core/error.h"

namespace latte::cli {

namespace fs = std::filesystem;

void check_output_path(const std::string& output, std::string_view flag) {
  if (output.empty()) ggl::fail("{} is empty: give the output file's name", flag);
  std::error_code ec;
  if (output.back() == '/' || fs::is_directory(output, ec))
    ggl::fail("{} {}: is a directory; give a file name", flag, output);
  const fs::path dir = fs::path(output).parent_path().empty() ? fs::path(".") : fs::path(output).parent_path();
  if (!fs::is_directory(dir, ec)) ggl::fail("{} {}: the directory {} does not exist", flag, output, dir.string());
  if (::access(dir.c_str(), W_OK) != 0)
    ggl::fail("{} {}: cannot write in {} ({})", flag, output, dir.string(), std::strerror(errno));
}

void check_not_input(const std::string& output, const std::string& input) {
  std::error_code ec;
  if (fs::equivalent(output, input, ec))
    ggl::fail("{}: the output would replace the input {}; write to another file", output, input);
}

}  // namespace latte::cli
