#include "src/cli/default_model.h"

#include <filesystem>
#include <system_error>
#include <vector>

#include "ggml-like/core/error.h"

namespace latte::cli {

std::string default_model_path() {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / "../../models" / kDefaultModelFile);           // build/bin/latte
    candidates.push_back(exe.parent_path() / "../share/latte/models" / kDefaultModelFile);  // make install
  }
  candidates.push_back(fs::path(LATTE_SOURCE_DIR) / "models" / kDefaultModelFile);
  for (const fs::path& p : candidates)
    if (fs::is_regular_file(p, ec)) return fs::weakly_canonical(p, ec).string();
  std::string places;
  for (const fs::path& p : candidates)
    places += (places.empty() ? "" : ", ") + p.parent_path().lexically_normal().string();
  ggl::fail("no model given (-m) and the default model {} was not found in {}", kDefaultModelFile, places);
}

}  // namespace latte::cli
