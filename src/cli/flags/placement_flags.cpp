#include "src/cli/flags/placement_flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

#include "ggml-like/core/error.h"
#include "ggml-like/registry/backend_registry.h"
#include "src/cli/flags/flag_checks.h"
#include "src/cli/flags/parse_flags.h"
#include "src/placement/byte_size.h"

namespace latte::cli {
namespace {

std::vector<std::string> comma_items(const std::string& value) {
  std::vector<std::string> out;
  size_t from = 0;
  for (size_t comma; (comma = value.find(',', from)) != std::string::npos; from = comma + 1)
    out.push_back(value.substr(from, comma - from));
  out.push_back(value.substr(from));
  return out;
}

std::optional<Device> device_named(std::string name) {
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda" || name == "cuda0" || name == "gpu") return Device::kGpu;
  return std::nullopt;
}

}  // namespace

std::string cpu_only_reason() { return fmt::format("{}, running on the CPU", ggl::gpu_devices().why_none); }

size_t auto_budget(size_t free_bytes, size_t total_bytes) {
  const size_t margin = std::max<size_t>(size_t{512} << 20, total_bytes / 20);
  return free_bytes > margin ? free_bytes - margin : 0;
}

void PlacementFlags::add_to(CLI::App& app, const std::string& group) {
  app_ = &app;
  app.add_flag("--cpu-moe", cpu_moe, "keep the routed experts of every layer on the CPU")->group(group);
  app.add_option("--n-cpu-moe", n_cpu_moe, "N: keep the routed experts of the first N layers on the CPU")
      ->check(integer(0, std::numeric_limits<int>::max()))
      ->group(group);
  app.add_option("--gpu-budget", gpu_budget,
                 "SIZE|auto: most GPU memory to use (e.g. 12G, 512M; auto: the free memory less a margin); "
                 "fills it with what every token reads first: attention and cache, dense FFN and shared "
                 "experts, the output head, then routed experts")
      ->group(group);
  app.add_option("--override-tensor", overrides,
                 "-ot REGEX=cuda|cpu[,...]: put the tensors whose name matches on that device (applied last; "
                 "caches are named cache.<layer>)")
      ->group(group);
}

std::string PlacementFlags::typed(std::string_view name) const {
  return app_ ? typed_flag(*app_, name) : std::string(name);
}

std::vector<std::string> PlacementFlags::given() const {
  std::vector<std::string> out;
  if (cpu_moe) out.push_back(typed("--cpu-moe"));
  if (n_cpu_moe > 0) out.push_back(fmt::format("{} {}", typed("--n-cpu-moe"), n_cpu_moe));
  if (!gpu_budget.empty()) out.push_back(fmt::format("{} {}", typed("--gpu-budget"), gpu_budget));
  for (const std::string& o : overrides) out.push_back(fmt::format("{} {}", typed("--override-tensor"), o));
  return out;
}

bool PlacementFlags::wants_auto(const std::string& gpu_layers) const {
  return gpu_budget == "auto" || (gpu_budget.empty() && gpu_layers == "auto");
}

void PlacementFlags::validate(const std::string& gpu_layers) const {
  // A model of one layer and a GPU as large as needed: only the values are checked.
  request(gpu_layers, 1, std::numeric_limits<size_t>::max(), std::numeric_limits<size_t>::max());
}

PlacementRequest PlacementFlags::request(const std::string& gpu_layers, int n_layer, std::optional<size_t> gpu_free,
                                         std::optional<size_t> gpu_total) const {
  PlacementRequest r;
  if (gpu_layers == "all" || gpu_layers == "-1") {
    r.gpu_layers = n_layer + 1;
  } else if (!gpu_layers.empty() && gpu_layers != "auto") {
    int n = 0;
    const auto [end, ec] = std::from_chars(gpu_layers.data(), gpu_layers.data() + gpu_layers.size(), n);
    if (ec != std::errc() || end != gpu_layers.data() + gpu_layers.size() || n < 0)
      ggl::fail("{} '{}' is not a layer count, auto or all", typed("--n-gpu-layers"), gpu_layers);
    r.gpu_layers = n;
  }
  r.cpu_moe = cpu_moe;
  r.n_cpu_moe = n_cpu_moe;
  if (wants_auto(gpu_layers)) {
    const std::string flag = gpu_budget == "auto" ? typed("--gpu-budget") : typed("--n-gpu-layers");
    if (!gpu_free) ggl::fail("{} auto: no GPU to size it for (give a size, e.g. 12G)", flag);
    r.budget = auto_budget(*gpu_free, gpu_total.value_or(*gpu_free));
  } else if (!gpu_budget.empty()) {
    r.budget = parse_byte_size(gpu_budget);
    if (!r.budget) ggl::fail("{} '{}' is not a size (e.g. 12G, 512M) or auto", typed("--gpu-budget"), gpu_budget);
  }
  for (const std::string& value : overrides)
    for (const std::string& item : comma_items(value)) {
      const size_t eq = item.rfind('=');
      if (eq == std::string::npos || eq == 0)
        ggl::fail("{} '{}' is not REGEX=cuda|cpu", typed("--override-tensor"), item);
      const std::string pattern = item.substr(0, eq), dev = item.substr(eq + 1);
      const std::optional<Device> device = device_named(dev);
      if (!device) ggl::fail("{} '{}': unknown device '{}' (cuda or cpu)", typed("--override-tensor"), item, dev);
      try {
        r.overrides.push_back({pattern, std::regex(pattern), *device});
      } catch (const std::regex_error& e) {
        ggl::fail("{} '{}': '{}' is not a regular expression ({})", typed("--override-tensor"), item, pattern,
                  e.what());
      }
    }
  return r;
}

}  // namespace latte::cli
