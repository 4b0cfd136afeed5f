#include "src/cli/flags/session_flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <limits>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/registry/backend_registry.h"
#include "src/cli/context_warning.h"
#include "src/cli/flags/ep_split.h"
#include "src/cli/flags/flag_checks.h"
#include "src/cli/notes.h"
#include "src/cli/flags/parse_flags.h"
#include "src/model/cache_footprint.h"
#include "src/model/kv_cache.h"
#include "src/placement/byte_size.h"
#include "src/placement/memory_budget.h"
#include "src/parallel/job.h"

namespace latte::cli {
namespace {

std::vector<std::string> items(const std::string& value, bool lists) {
  std::vector<std::string> out;
  if (!lists) return {value};
  size_t from = 0;
  for (size_t comma; (comma = value.find(',', from)) != std::string::npos; from = comma + 1)
    out.push_back(value.substr(from, comma - from));
  out.push_back(value.substr(from));
  return out;
}

}  // namespace

void SessionFlags::add_to(CLI::App& app) {
  app_ = &app;
  app.add_option("-c,--ctx-size", n_ctx, "context size in tokens (default: min(4096, the model's training context))")
      ->check(integer(1));
  app.add_option("-t,--threads", threads, "threads (default: number of physical cores)")
      ->check(integer(0, std::numeric_limits<int>::max()));
  app.add_option("-b,--batch,--batch-size", batch, "most prompt tokens evaluated in one step (default 512)")
      ->check(integer(1));
  app.add_option("--cache-type", cache_type,
                 "cache element type: f32, f16 (default), bf16, q8_0, q4_0 (4-bit, docs/batching.md). deepseek2 caches "
                 "kv_lora + rope values per token and layer (the MLA latent); llama caches K and V per KV head");
  app.add_option("--mla-mode", mla_mode,
                 "deepseek2 attention: auto (default; absorbed for decode, naive for a prefill when cheaper), "
                 "absorb (W_UK/W_UV folded into queries/outputs, attends the cached latents) or naive (expands the "
                 "latents into per-head K/V)");
  app.add_flag("--deterministic", deterministic,
               "bit-identical results whatever else is evaluated beside a sequence, however its prompt is split "
               "and however many threads run it (kernel paths fixed, absorbed MLA; CPU only; docs/batching.md)");
  const char* group = "llama.cpp flags";
  app.add_option("--n-gpu-layers", gpu_layers,
                 "-ngl N|auto|all: the last N layers on the GPU (all: everything but the token embedding); "
                 "without a GPU noted and run on the CPU")
      ->group(group);
  placement.add_to(app, group);
  app.add_flag("--no-op-offload", no_op_offload,
               "-nopo: never copy CPU-held experts to the GPU for long prompts (by default a prompt batch of at "
               "least 32 * n_expert / n_used tokens runs its expert products on the GPU)")
      ->group(group);
  app.add_option("--flash-attn", flash_attn,
                 "-fa [on|off|auto]: latte's attention is always fused (flash-attention style), so on and auto are "
                 "what it does and off is noted and ignored")
      ->group(group);
  app.add_option("--cache-type-k", cache_type_k, "-ctk TYPE: the cache type (latte has one; see --cache-type)")
      ->group(group);
  app.add_option("--cache-type-v", cache_type_v,
                 "-ctv TYPE: the cache type; when it differs from -ctk, -ctk's is used (deepseek2 caches one latent "
                 "per token, llama K and V in one type)")
      ->group(group);
  app.add_option("--ubatch-size", ubatch,
                 "-ub N: llama.cpp's physical batch, which is what latte's -b is: the step is min(-b, -ub)")
      ->check(integer(1))
      ->group(group);
  app.add_flag(
         "--no-repack", no_repack,
         "-nr: keep every weight as the file has it (by default Q4_0 and Q8_0 matrices and a Q6_K output head are "
         "rewritten at load into 8 interleaved rows, which the AVX2 and AVX-512 decode kernels read fastest)")
      ->group(group);
  app.add_option("--override-kv", override_kv,
                 "KEY=TYPE:VALUE: load the model with this metadata value instead of the file's (TYPE int, float, "
                 "bool or str; repeatable), e.g. deepseek2.expert_group_count=int:1")
      ->group(group);
  app.add_option("--mem-budget", mem_budget,
                 "SIZE: the RAM the model may take (default: the memory cgroup's limit or MemAvailable, less 5%; "
                 "none: no budget, everything in RAM); routed experts beyond it are read from the file into a "
                 "cache of whole experts (docs/memory-budget.md)");
  app.add_option("--mpi-timeout", mpi_timeout,
                 "SECONDS: under mpirun, how long a rank waits for the others at a meeting point (a MoE layer's "
                 "expert exchange) before it ends the job with an error naming the ranks not heard from")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--ep-split", ep_split,
                 "contiguous|FILE: under mpirun, which rank holds which routed experts: contiguous ranges, or as "
                 "many experts each, balanced by the tokens routed to them in FILE, an importance matrix of the "
                 "model (latte imatrix)")
      ->capture_default_str();
  app.add_flag("--no-mmap", no_mmap, "accepted; latte always maps the model file read-only")->group(group);
  app.add_flag("--mlock", mlock, "accepted; the mapped weights are not locked in memory in this build")->group(group);
  app.add_flag("--log-disable", log_disable, "no notes, warnings or summary line on stderr (errors still print)")
      ->group(group);
}

ModelOptions SessionFlags::model_options(const std::string& path) const { return model_options(path, mem_budget); }

ModelOptions SessionFlags::model_options(const std::string& path, const std::string& budget) const {
  ModelOptions o;
  o.repack = !no_repack;
  for (const std::string& spec : override_kv) o.overrides.push_back(parse_metadata_override(spec));
  Job& job = Job::get();
  if (job.alone()) {
    if (ep_split != "contiguous")
      note("latte", "--ep-split splits the experts among the ranks of mpirun; alone it does nothing");
    o.expert_cache = expert_cache_for(path, budget);
    return o;
  }
  job.set_timeout(mpi_timeout);
  job.check_same("a model file", file_head_hash(path, ggl::GgufFile(path).data_offset()));
  o.expert_share = {.rank = job.rank(),
                    .ranks = job.size(),
                    .exchange = job.expert_exchange(),
                    .split = expert_split(ep_split, path, job.size())};
  uint64_t split_hash = job_hash({});
  for (const std::vector<int32_t>& layer : o.expert_share.split.owners())
    split_hash = job_hash({reinterpret_cast<const char*>(layer.data()), layer.size() * sizeof(int32_t)}, split_hash);
  job.check_same("an expert split (--ep-split)", split_hash);
  if (const char* v = std::getenv("LATTE_EP_OVERLAP")) {  // for measuring (docs/scale-out.md)
    if (std::string(v) != "0" && std::string(v) != "1") ggl::fail("LATTE_EP_OVERLAP={}: expected 0 or 1", v);
    o.expert_share.overlap = std::string(v) == "1";
  }
  // A budget bounds this rank's share (read at load when it fits), not the whole model.
  o.expert_cache = expert_cache_for(path, budget, /*with_note=*/false);
  return o;
}

std::vector<std::string> SessionFlags::mem_budgets() const {
  if (mem_budget.empty()) return {mem_budget};  // not given: the system's default
  const std::vector<std::string> list = items(mem_budget, lists);
  for (const std::string& item : list) {
    // An empty item would silently mean the default (memory_budget's "no value").
    if (item.empty()) ggl::fail("{} '{}' has an empty item", typed("--mem-budget"), mem_budget);
    memory_budget(item, typed("--mem-budget"));  // throws for a value that is not a size
  }
  return list;
}

// The RAM plan of `latte info --plan` (placement/memory_budget.h) for a CPU run at this context,
// cache type and batch: an expert cache where the routed experts do not all fit the budget.
std::optional<size_t> SessionFlags::expert_cache_for(const std::string& path, const std::string& budget_value,
                                                     bool with_note) const {
  const std::optional<size_t> budget = memory_budget(budget_value, typed("--mem-budget")).bytes;
  if (!budget) return std::nullopt;
  const ggl::GgufFile file(path);
  const std::string arch = file.metadata().get_or<std::string>("general.architecture", "");
  if (arch != "deepseek2") return std::nullopt;  // the only architecture with routed experts here
  const KvCacheFootprint f = kv_cache_footprint(file, resolve_cache_type(/*with_notes=*/false));
  const Hparams& hp = f.hparams;
  const int64_t ctx = n_ctx > 0 ? n_ctx : default_context(hp);
  const Placement p = plan_placement(
      classify_tensors(file.tensors(), hp.n_layer, f.bytes_per_token_and_layer() * static_cast<size_t>(ctx)),
      static_cast<int>(hp.n_layer), PlacementRequest{}, 0);
  const RamPlan r = plan_ram(p, *budget, gpu_work_bytes(hp, batch, ctx), hp.moe.n_expert, hp.moe.n_expert_used);
  if (r.expert_count == 0 || r.all_experts_fit()) return std::nullopt;
  const std::string prog = app_ ? app_->get_name() : "latte";
  const auto b = [](size_t n) { return format_bytes(static_cast<double>(n)); };
  if (r.cache_experts == 0) {
    warning(prog, fmt::format("a {} memory budget leaves no room for an expert cache ({} resident, {} work "
                              "buffers): the routed experts are read from the file's mapping as the kernel pages them",
                              b(r.budget), b(r.resident), b(r.work)));
    return std::nullopt;
  }
  if (with_note)
    note(prog,
         fmt::format("a {} memory budget: {} resident, an expert cache of {} for {} of the {} routed experts ({}); "
                     "the rest are read from the file when a token needs them",
                     b(r.budget), b(r.resident + r.work), b(r.expert_cache), r.cache_experts, r.expert_count,
                     b(r.experts)));
  return r.expert_cache;
}

std::string SessionFlags::typed(std::string_view name) const {
  return app_ ? typed_flag(*app_, name) : std::string(name);
}

ggl::Type SessionFlags::resolve_cache_type(bool with_notes) const {
  // --cache-type, else -ctk, else -ctv: latte keeps one cache element type.
  const bool k = !cache_type_k.empty(), v = !cache_type_v.empty();
  const bool explicit_type = app_ && app_->count("--cache-type") > 0;
  std::string name = cache_type, flag = "--cache-type";
  if (explicit_type) {
    for (const auto& [given, other] : {std::pair{cache_type_k, "--cache-type-k"}, {cache_type_v, "--cache-type-v"}})
      if (!given.empty() && given != cache_type)
        ggl::fail("--cache-type {} and {} {} disagree (latte has one cache type)", cache_type, typed(other), given);
  } else if (k || v) {
    name = k ? cache_type_k : cache_type_v;
    flag = k ? "--cache-type-k" : "--cache-type-v";
    if (with_notes && k && v && cache_type_k != cache_type_v)
      note(app_->get_name(),
           fmt::format("{} {} differs from {} {}: latte keeps the cache in one type; using {}", typed("--cache-type-v"),
                       cache_type_v, typed("--cache-type-k"), cache_type_k, cache_type_k));
  }
  const auto type = cache_type_from_name(name);
  if (!type) ggl::fail("{} '{}' is not one of {}", typed(flag), name, kCacheTypeNames);
  return *type;
}

void SessionFlags::note_unsupported() const {
  const std::string prog = app_ ? app_->get_name() : "latte";
  std::vector<std::string> offload = placement.given();
  if (!gpu_layers.empty()) {
    bool any = false;
    for (std::string n : items(gpu_layers, lists)) {
      placement.validate(n);
      any |= n != "0";
    }
    if (any) offload.insert(offload.begin(), fmt::format("{} {}", typed("--n-gpu-layers"), gpu_layers));
  } else {
    placement.validate("");
  }
  if (!offload.empty() && ggl::gpu_devices().devices.empty())
    note(prog, fmt::format("{}: {}", fmt::join(offload, " "), cpu_only_reason()));
  if (!flash_attn.empty()) {
    bool off = false;
    for (const std::string& v : items(flash_attn, lists)) {
      if (v != "on" && v != "off" && v != "auto" && v != "1" && v != "0")
        ggl::fail("{} '{}' is not on, off or auto", typed("--flash-attn"), v);
      off |= v == "off" || v == "0";
    }
    if (off)
      note(prog, fmt::format("{} {}: latte's attention is always fused (flash-attention style); running it fused",
                             typed("--flash-attn"), flash_attn));
  }
  if (no_mmap) note(prog, "--no-mmap: latte always maps the model file read-only; loading it as usual");
  if (mlock)
    note(prog, "--mlock: not supported in this build; the mapped weights may be paged out under memory pressure");
}

SessionOptions SessionFlags::options() const {
  set_log_disabled(log_disable);
  SessionOptions o;
  const auto mode = parse_mla_mode(mla_mode);
  if (!mode) ggl::fail("--mla-mode '{}' is not one of auto, absorb, naive", mla_mode);
  o.cache_type = resolve_cache_type();
  note_unsupported();
  o.n_ctx = n_ctx;
  o.mla_mode = *mode;
  o.deterministic = deterministic;
  o.n_threads = threads;
  if (!lists) o.placement = offload_request(gpu_layers);
  o.op_offload = !no_op_offload;
  // -ub is llama.cpp's physical batch, the tokens of one graph: latte's -b. With both, the step is
  // the smaller, as in llama.cpp (where the physical batch never exceeds the logical one).
  o.n_batch = ubatch > 0 && (ubatch < batch || !app_ || app_->count("--batch") == 0) ? ubatch : batch;
  return o;
}

std::optional<PlacementRequest> SessionFlags::offload_request(const std::string& ngl) const {
  if (placement.given().empty() && (ngl.empty() || ngl == "0")) return std::nullopt;
  const ggl::GpuDevices gpus = ggl::gpu_devices();
  if (gpus.devices.empty()) return std::nullopt;
  // The layer count only matters for all / -1 (every layer and the output head): any count above
  // the model's means the same.
  constexpr int kMoreThanAnyModel = 1 << 20;
  const ggl::GpuDevice& d = gpus.devices.front();
  return placement.request(ngl, kMoreThanAnyModel, d.free_bytes, d.total_bytes);
}

std::vector<std::pair<std::string, std::optional<PlacementRequest>>> SessionFlags::bench_placements() const {
  std::vector<std::pair<std::string, std::optional<PlacementRequest>>> out;
  for (const std::string& n : items(gpu_layers, true)) {
    std::optional<PlacementRequest> r = offload_request(n);
    if (r || out.empty() || out.back().second) out.emplace_back(n, std::move(r));
  }
  return out;
}

void SessionFlags::note_offload(const Session& session) const {
  note_offload(session.offload(), session.model().hparams(), session.device());
}

void SessionFlags::note_offload(const OffloadPlan* plan, const Hparams& hp, const ggl::Backend* device) const {
  if (!plan) return;
  const std::string prog = app_ ? app_->get_name() : "latte";
  note(prog, fmt::format("{} on {}", placement_summary(plan->placement, hp.is_mla()), device->name()));
  if (!plan->kept_on_cpu.empty())
    note(prog, fmt::format("{} tensors kept on the CPU: {} has no kernel for a node reading them (first: {})",
                           plan->kept_on_cpu.size(), device->name(), plan->kept_on_cpu.front()));
}

void SessionFlags::warn_beyond_training(const Hparams& hp, int64_t n_ctx) const {
  const std::string text = beyond_training_warning(hp, fmt::format("{} {}", typed("--ctx-size"), n_ctx), n_ctx);
  if (!text.empty()) warning(app_ ? app_->get_name() : "latte", text);
}

}  // namespace latte::cli
