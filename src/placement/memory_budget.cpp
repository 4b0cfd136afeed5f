#include "src/placement/memory_budget.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>

#include "ggml-like/core/error.h"
#include "src/placement/byte_size.h"

namespace latte {
namespace {

namespace fs = std::filesystem;

// v1 writes "no limit" as the largest page-aligned counter (9223372036854771712); anything this
// large is no limit.
constexpr size_t kNoLimit = size_t{1} << 62;

std::optional<size_t> read_size_file(const fs::path& path) {
  std::ifstream f(path);
  std::string word;
  if (!(f >> word) || word == "max") return std::nullopt;
  size_t value = 0;
  const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (ec != std::errc() || end != word.data() + word.size() || value >= kNoLimit) return std::nullopt;
  return value;
}

// The smallest limit in `file` of the cgroup at `dir` and of its parents up to `top`.
std::optional<size_t> tightest_limit(fs::path dir, const fs::path& top, const char* file) {
  std::optional<size_t> limit;
  for (;;) {
    if (const auto v = read_size_file(dir / file)) limit = limit ? std::min(*limit, *v) : *v;
    if (dir == top || dir.native().size() <= top.native().size()) break;
    dir = dir.parent_path();
  }
  return limit;
}

std::optional<size_t> cgroup_limit(const fs::path& root) {
  std::ifstream f(root / "proc/self/cgroup");
  std::string line;
  std::optional<std::string> v1, v2;
  while (std::getline(f, line)) {  // "id:controllers:path"
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) v2 = path;
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');)
      if (name == "memory") v1 = path;
  }
  // A path the mount does not show (another namespace's view) falls back to the mount's top.
  const auto under = [](const fs::path& top, const std::string& path) {
    const fs::path relative = fs::path(path).relative_path();
    return !relative.empty() && fs::exists(top / relative) ? top / relative : top;
  };
  if (v1) {
    const fs::path top = root / "sys/fs/cgroup/memory";
    return tightest_limit(under(top, *v1), top, "memory.limit_in_bytes");
  }
  if (v2) {
    const fs::path top = root / "sys/fs/cgroup";
    return tightest_limit(under(top, *v2), top, "memory.max");
  }
  return std::nullopt;
}

std::optional<size_t> mem_available(const fs::path& root) {
  std::ifstream f(root / "proc/meminfo");
  std::string key, unit;
  size_t value = 0;
  while (f >> key >> value) {
    std::getline(f, unit);
    if (key == "MemAvailable:") return value * 1024;  // kB
  }
  return std::nullopt;
}

}  // namespace

MemoryLimits read_memory_limits(const std::string& root) { return {cgroup_limit(root), mem_available(root)}; }

std::optional<size_t> default_memory_budget(const MemoryLimits& limits) {
  std::optional<size_t> base = limits.cgroup_limit;
  if (limits.mem_available) base = base ? std::min(*base, *limits.mem_available) : *limits.mem_available;
  if (!base) return std::nullopt;
  const size_t headroom = std::max<size_t>(size_t{256} << 20, *base / 20);
  return *base > headroom ? *base - headroom : 0;
}

MemoryBudget memory_budget(const std::string& value, const std::string& flag) {
  // No budget at all, as when the system tells no limit: a way to turn the default's cache off.
  if (value == "none") return {std::nullopt, flag + " none"};
  if (!value.empty()) {
    const std::optional<size_t> bytes = parse_byte_size(value);
    if (!bytes) ggl::fail("{} '{}' is not a size (e.g. 16G)", flag, value);
    return {bytes, flag};
  }
  const MemoryLimits limits = read_memory_limits();
  return {default_memory_budget(limits),
          limits.cgroup_limit ? "the memory cgroup's limit or MemAvailable, less 5%" : "MemAvailable, less 5%"};
}

RamPlan plan_ram(const Placement& p, size_t budget, size_t work_bytes, int64_t n_expert, int64_t n_expert_used) {
  RamPlan r;
  r.budget = budget;
  r.work = work_bytes;
  std::map<int, size_t> layer_experts;  // the CPU's routed bytes of each layer
  for (const PlacedTensor& t : p.tensors) {
    if (t.device != Device::kCpu) continue;
    if (t.tensor.role == TensorRole::kRoutedExperts && n_expert > 0) {
      r.experts += t.tensor.bytes;
      layer_experts[t.tensor.layer] += t.tensor.bytes;
    } else {
      r.resident += t.tensor.bytes;
    }
  }
  const auto layers = static_cast<int64_t>(layer_experts.size());
  for (const auto& [layer, bytes] : layer_experts)
    r.expert_bytes = std::max(r.expert_bytes, (bytes + n_expert - 1) / static_cast<size_t>(n_expert));
  r.expert_count = layers * n_expert;
  r.expert_cache = r.resident_fits() ? budget - r.resident - r.work : 0;
  if (r.expert_bytes > 0)
    r.cache_experts = std::min<int64_t>(r.expert_count, static_cast<int64_t>(r.expert_cache / r.expert_bytes));
  if (layers > 0) {
    // An equal share of the cache for every layer: a routed expert is there with probability
    // share / n_expert.
    const double share = static_cast<double>(r.cache_experts) / static_cast<double>(layers);
    const double miss = 1.0 - std::min(1.0, share / static_cast<double>(n_expert));
    for (const auto& [layer, bytes] : layer_experts)
      r.uniform_miss_bytes_per_token +=
          static_cast<double>(n_expert_used) * miss * static_cast<double>(bytes) / static_cast<double>(n_expert);
  }
  return r;
}

std::string ram_plan_lines(const RamPlan& r) {
  const auto b = [](double n) { return format_bytes(n); };
  std::string out = fmt::format(
      "ram: {} resident (every tensor on the CPU but the routed experts, caches included)"
      " + {} work buffers, of a {} budget\n",
      b(static_cast<double>(r.resident)), b(static_cast<double>(r.work)), b(static_cast<double>(r.budget)));
  if (r.expert_count > 0) {
    out += fmt::format("ram: routed experts {} ({} experts of up to {})", b(static_cast<double>(r.experts)),
                       r.expert_count, b(static_cast<double>(r.expert_bytes)));
    if (r.all_experts_fit())
      out += ": all fit, nothing is read from disk after the first token that needs them\n";
    else
      out += fmt::format(
          ": {} left for them holds {} ({:.0f}%); with uniformly random routing about {} a token comes from disk\n",
          b(static_cast<double>(r.expert_cache)), r.cache_experts,
          100.0 * static_cast<double>(r.cache_experts) / static_cast<double>(r.expert_count),
          b(r.uniform_miss_bytes_per_token));
  }
  if (!r.resident_fits())
    out += fmt::format(
        "warning: the resident part and work buffers ({}) do not fit the {} budget: every token would "
        "page\n",
        b(static_cast<double>(r.resident + r.work)), b(static_cast<double>(r.budget)));
  return out;
}

}  // namespace latte
