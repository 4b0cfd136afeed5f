// `latte info FILE` (or -m FILE): a compact, human-readable description of a GGUF file; with
// --plan, where its tensors would live with a GPU (src/placement/).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "ggml-like/core/error.h"
#include "ggml-like/gguf/gguf.h"
#include "ggml-like/cpu/kernel_set.h"
#include "src/bench/bench_report.h"
#include "src/cli/commands/commands.h"
#include "src/cli/flags/parse_flags.h"
#include "ggml-like/registry/backend_registry.h"
#include "src/cli/flags/flag_checks.h"
#include "src/cli/flags/placement_flags.h"
#include "src/model/cache_footprint.h"
#include "src/model/kv_cache.h"
#include "src/runtime/session.h"
#include "src/placement/byte_size.h"
#include "src/placement/expert_ranks.h"
#include "src/placement/memory_budget.h"
#include "src/placement/plan_table.h"

namespace latte::cli {
namespace {

std::string human_count(double n) {
  if (n >= 1e9) return fmt::format("{:.2f}B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.2f}M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.1f}K", n / 1e3);
  return fmt::format("{:.0f}", n);
}

// A scalar value as text; arrays as "[n x type]". Long strings are cut for display.
std::string value_text(const ggl::Value& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, ggl::Array>)
          return fmt::format("[{} x {}]", x.items.size(), ggl::value_type_name(x.element_type));
        else if constexpr (std::is_same_v<T, std::string>)
          return x.size() > 60 ? fmt::format("\"{}...\" ({} chars)", x.substr(0, 40), x.size()) : '"' + x + '"';
        else if constexpr (std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>)
          return fmt::format("{}", static_cast<int>(x));
        else
          return fmt::format("{}", x);
      },
      v.data);
}

void print_hyperparameters(const ggl::Metadata& md, const std::string& arch) {
  // Every "<arch>.*" key, with the prefix dropped, wrapped to a readable width.
  std::vector<std::string> items;
  for (const auto& [key, value] : md.entries())
    if (key.size() > arch.size() + 1 && key.compare(0, arch.size() + 1, arch + ".") == 0)
      items.push_back(fmt::format("{}={}", key.substr(arch.size() + 1), value_text(value)));
  std::string line;
  for (const std::string& item : items) {
    if (!line.empty() && line.size() + item.size() > 100) {
      fmt::print("  {}\n", line);
      line.clear();
    }
    line += line.empty() ? item : "  " + item;
  }
  if (!line.empty()) fmt::print("  {}\n", line);
}

void print_tokenizer(const ggl::Metadata& md) {
  std::string model = md.get_or<std::string>("tokenizer.ggml.model", "(none)");
  std::string line = "tokenizer:     " + model;
  if (md.has("tokenizer.ggml.pre")) line += " (pre: " + md.get<std::string>("tokenizer.ggml.pre") + ")";
  if (const ggl::Value* tokens = md.find("tokenizer.ggml.tokens"))
    if (const auto* arr = std::get_if<ggl::Array>(&tokens->data)) line += fmt::format(", {} tokens", arr->items.size());
  if (const ggl::Value* merges = md.find("tokenizer.ggml.merges"))
    if (const auto* arr = std::get_if<ggl::Array>(&merges->data)) line += fmt::format(", {} merges", arr->items.size());
  if (md.has("tokenizer.chat_template")) line += ", chat template";
  fmt::print("{}\n", line);
}

void print_tensor_summary(const ggl::GgufFile& file) {
  struct Totals {
    size_t tensors = 0, bytes = 0;
    int64_t elements = 0;
  };
  std::map<std::string_view, Totals> per_type;
  Totals all;
  for (const ggl::TensorInfo& t : file.tensors()) {
    Totals& tt = per_type[ggl::type_name(t.type)];
    for (Totals* x : {&tt, &all}) x->tensors++, x->bytes += t.nbytes, x->elements += t.n_elements();
  }
  if (all.tensors == 0) {
    fmt::print("tensors:       none\n");
    return;
  }
  fmt::print("tensors:       {} tensors, {} parameters, {}, {:.2f} bits/weight\n", all.tensors,
             human_count(static_cast<double>(all.elements)), format_bytes(static_cast<double>(all.bytes)),
             8.0 * static_cast<double>(all.bytes) / static_cast<double>(all.elements));
  for (const auto& [name, t] : per_type)
    fmt::print("  {:<6} {:>4} tensors  {:>10}  {:>8} params  {:.2f} bits/weight\n", name, t.tensors,
               format_bytes(static_cast<double>(t.bytes)), human_count(static_cast<double>(t.elements)),
               8.0 * static_cast<double>(t.bytes) / static_cast<double>(t.elements));
}

// For files latte can run: the cache cost per token at the default 16-bit element type, next to
// what caching per-head K and V would take (the MLA saving).
void print_cache_footprint(const ggl::GgufFile& file) {
  const latte::KvCacheFootprint f = latte::kv_cache_footprint(file, ggl::Type::F16);
  std::string line = fmt::format("kv cache:      {} per token at f16 ({} B per layer)",
                                 format_bytes(static_cast<double>(f.bytes_per_token)), f.bytes_per_token_and_layer());
  if (f.per_head_kv_bytes_per_token != f.bytes_per_token)
    line += fmt::format("; per-head K/V would take {} B per layer ({:.1f}x)", f.per_head_kv_bytes_per_token_and_layer(),
                        static_cast<double>(f.per_head_kv_bytes_per_token) / static_cast<double>(f.bytes_per_token));
  fmt::print("{}\n", line);
}

// The machine side: the CPU, and which kernel set runs on it (the best it can run, or LATTE_CPU's).
void print_system() {
  const std::string cpu = bench::cpu_model_name();
  fmt::print("cpu:           {}\n", cpu.empty() ? "unknown" : cpu);
  fmt::print("kernels:       {}\n", ggl::describe_cpu_kernels(ggl::cpu_kernels()));
  std::vector<std::string> runnable;
  for (const ggl::CpuKernels* k : ggl::runnable_cpu_kernels()) runnable.emplace_back(k->isa);
  fmt::print("runnable sets: {} (LATTE_CPU=<set> picks one)\n", fmt::join(runnable, ", "));
  const ggl::GpuDevices gpus = ggl::gpu_devices();
  if (gpus.devices.empty()) fmt::print("gpu:           none ({})\n", gpus.why_none);
  for (const ggl::GpuDevice& d : gpus.devices)
    fmt::print("gpu:           {}, {} free of {}\n", d.name, format_bytes(static_cast<double>(d.free_bytes)),
               format_bytes(static_cast<double>(d.total_bytes)));
}

// What --plan reads besides the placement flags: the context and cache type the cache is sized
// for, the batch the work buffers are sized for, and a GPU to plan for when there is none.
struct PlanFlags {
  bool plan = false;
  std::string gpu_layers;
  PlacementFlags placement;
  int64_t n_ctx = 0;
  std::string cache_type = "f16";
  int64_t batch = 512;
  std::string gpu_vram;
  std::string mem_budget;
  int ranks = 1;

  void add_to(CLI::App& app) {
    const std::string group = "placement (--plan)";
    app.add_flag("--plan", plan,
                 "print where each tensor would live with a GPU (the placement flags below; no GPU needed)");
    app.add_option("--n-gpu-layers", gpu_layers, "-ngl N|auto|all: the last N layers on the GPU")->group(group);
    placement.add_to(app, group);
    app.add_option("-c,--ctx-size", n_ctx, "context the cache is sized for (default: min(4096, training context))")
        ->check(integer(1))
        ->group(group);
    app.add_option("--cache-type", cache_type, "cache element type: f32, f16 (default), bf16, q8_0")->group(group);
    app.add_option("-b,--batch-size", batch, "tokens per step the work buffers are sized for (default 512)")
        ->check(integer(1))
        ->group(group);
    app.add_option("--gpu-vram", gpu_vram, "SIZE: plan for a GPU with this much free memory (default: the one found)")
        ->group(group);
    app.add_option("--mem-budget", mem_budget,
                   "SIZE: plan the CPU's share for this much RAM (default: the memory cgroup's limit or "
                   "MemAvailable, less 5%; none: no budget)")
        ->group(group);
    app.add_option("--ranks", ranks,
                   "N: plan for N processes (mpirun -np N) that divide the routed experts, each holding the dense part "
                   "and a contiguous 1/N of every layer's experts")
        ->check(integer(1))
        ->group(group);
  }

  // A placement flag without --plan is a mistake, not something to ignore.
  void require_plan(const CLI::App& app) const {
    if (plan) return;
    for (const char* name : {"--n-gpu-layers", "--cpu-moe", "--n-cpu-moe", "--gpu-budget", "--override-tensor",
                             "--ctx-size", "--cache-type", "--batch-size", "--gpu-vram", "--mem-budget", "--ranks"})
      if (app.count(name) > 0) ggl::fail("{} needs --plan", typed_flag(app, name));
  }

  void print(const CLI::App& app, const ggl::GgufFile& file) const {
    const auto type = cache_type_from_name(cache_type);
    if (!type) ggl::fail("--cache-type '{}' is not one of {}", cache_type, kCacheTypeNames);
    std::optional<size_t> free, total;
    std::string device;
    if (!gpu_vram.empty()) {
      free = total = parse_byte_size(gpu_vram);
      if (!free) ggl::fail("{} '{}' is not a size (e.g. 24G)", typed_flag(app, "--gpu-vram"), gpu_vram);
      device = fmt::format("a GPU with {} free (--gpu-vram)", format_bytes(static_cast<double>(*free)));
    } else if (const ggl::GpuDevices gpus = ggl::gpu_devices(); !gpus.devices.empty()) {
      free = gpus.devices.front().free_bytes;
      total = gpus.devices.front().total_bytes;
      device = fmt::format("{}, {} free", gpus.devices.front().name, format_bytes(static_cast<double>(*free)));
    } else {
      device = fmt::format("no GPU here ({}); give --gpu-vram SIZE to plan for one", gpus.why_none);
    }
    const latte::KvCacheFootprint f = latte::kv_cache_footprint(file, *type);
    const latte::Hparams& hp = f.hparams;
    const int64_t ctx = n_ctx > 0 ? n_ctx : latte::default_context(hp);
    const int n_layer = static_cast<int>(hp.n_layer);
    const latte::PlacementRequest request = placement.request(gpu_layers, n_layer, free, total);
    const std::vector<latte::PlanTensor> tensors =
        latte::classify_tensors(file.tensors(), hp.n_layer, f.bytes_per_token_and_layer() * static_cast<size_t>(ctx));
    const latte::Placement p = latte::plan_placement(tensors, n_layer, request, latte::gpu_work_bytes(hp, batch, ctx));
    fmt::print("placement:     -c {} ({} cache), batch {}, {}\n", ctx, ggl::type_name(*type), batch, device);
    fmt::print("{}", latte::plan_table(p, hp.is_mla()));
    print_ram(app, p, latte::gpu_work_bytes(hp, batch, ctx), hp);
  }

  // The RAM tier: the budget and what it holds (src/placement/memory_budget.h).
  void print_ram(const CLI::App& app, const latte::Placement& p, size_t work, const latte::Hparams& hp) const {
    const latte::MemoryBudget budget = latte::memory_budget(mem_budget, typed_flag(app, "--mem-budget"));
    if (!budget.bytes) {
      const std::string why = mem_budget.empty()
                                  ? "this system tells neither a cgroup limit nor MemAvailable; give --mem-budget"
                                  : budget.source + ": every tensor stays in RAM, nothing is paged";
      fmt::print("ram: no budget ({})\n", why);
    } else {
      fmt::print("memory:        {} budget ({})\n", format_bytes(static_cast<double>(*budget.bytes)), budget.source);
      fmt::print("{}",
                 latte::ram_plan_lines(latte::plan_ram(p, *budget.bytes, work, hp.moe.n_expert, hp.moe.n_expert_used)));
    }
    if (ranks > 1) {  // each rank's share, against the same budget a rank
      const latte::RamPlan all =
          latte::plan_ram(p, budget.bytes.value_or(0), work, hp.moe.n_expert, hp.moe.n_expert_used);
      fmt::print("{}", latte::rank_plan_lines(latte::split_experts(all, hp.moe.n_expert, ranks), hp.moe.n_expert,
                                              budget.bytes.value_or(0)));
    }
  }
};

}  // namespace

int cmd_info(int argc, char** argv) {
  CLI::App app{"Describe a GGUF file: architecture, hyperparameters, tokenizer, tensors, sizes", argv[0]};
  std::string path, model_path;
  bool list_tensors = false, system = false;
  auto* positional = app.add_option("file", path, "GGUF file");
  auto* model = app.add_option("-m,--model", model_path, "the GGUF file, as the other commands take it");
  positional->excludes(model);
  app.add_flag("--tensors", list_tensors, "list every tensor with type and shape");
  app.add_flag("--system", system, "describe this machine: the CPU, which kernel set runs, the GPUs (no file needed)");
  PlanFlags plan;
  plan.add_to(app);
  if (auto done = parse_flags(app, argc, argv)) return *done;
  plan.require_plan(app);
  if (model->count()) path = model_path;
  if (system) {
    print_system();
    if (path.empty()) return 0;
  }
  if (path.empty()) ggl::fail("give the GGUF file: latte info FILE or latte info -m FILE");

  ggl::GgufFile file(path);
  const ggl::Metadata& md = file.metadata();
  fmt::print("file:          {} (GGUF v{}, {}, {} metadata keys, alignment {})\n", path, file.version(),
             format_bytes(static_cast<double>(file.file_size())), md.entries().size(), file.alignment());
  std::string arch = md.get_or<std::string>("general.architecture", "");
  if (!arch.empty()) {
    std::string name = md.get_or<std::string>("general.name", "");
    fmt::print("architecture:  {}{}\n", arch, name.empty() ? "" : "  (" + name + ")");
    print_hyperparameters(md, arch);
  }
  print_tokenizer(md);
  print_tensor_summary(file);
  if (!file.tensors().empty() && (arch == "deepseek2" || arch == "llama")) print_cache_footprint(file);

  if (plan.plan) {
    if (arch != "deepseek2" && arch != "llama")
      ggl::fail("{}: --plan needs a model latte runs (deepseek2, llama)", path);
    plan.print(app, file);
  }

  if (list_tensors)
    for (const ggl::TensorInfo& t : file.tensors())
      fmt::print("  {:<36} {:<5} [{}]\n", t.name, ggl::type_name(t.type),
                 fmt::join(std::vector<int64_t>(t.ne, t.ne + t.n_dims), ", "));
  return 0;
}

}  // namespace latte::cli
