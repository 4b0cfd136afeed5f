#include "src/cli/session_flags.h"

#include "ggml-like/core/error.h"

namespace latte::cli {

void SessionFlags::add_to(CLI::App& app) {
  app.add_option("-c,--ctx-size", n_ctx, "context size in tokens (default: min(4096, the model's training context))")
      ->check(CLI::PositiveNumber);
  app.add_option("-t,--threads", threads, "threads (default: number of physical cores)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("-b,--batch,--batch-size", batch, "most prompt tokens evaluated in one step (default 512)")
      ->check(CLI::PositiveNumber);
  app.add_option("--cache-type", cache_type,
                 "cache element type: f32, f16 (default), bf16, q8_0. deepseek2 caches kv_lora + rope values per "
                 "token and layer (the MLA latent); llama caches K and V per KV head");
  app.add_option("--mla-mode", mla_mode,
                 "deepseek2 attention: auto (default; absorbed for decode, naive for a prefill when cheaper), "
                 "absorb (W_UK/W_UV folded into queries/outputs, attends the cached latents) or naive (expands the "
                 "latents into per-head K/V)");
}

SessionOptions SessionFlags::options() const {
  SessionOptions o;
  const auto type = ggl::type_from_name(cache_type);
  if (!type || (*type != ggl::Type::F32 && *type != ggl::Type::F16 && *type != ggl::Type::BF16 &&
                *type != ggl::Type::Q8_0))
    ggl::fail("--cache-type '{}' is not one of f32, f16, bf16, q8_0", cache_type);
  const auto mode = parse_mla_mode(mla_mode);
  if (!mode) ggl::fail("--mla-mode '{}' is not one of auto, absorb, naive", mla_mode);
  o.n_ctx = n_ctx;
  o.cache_type = *type;
  o.mla_mode = *mode;
  o.n_threads = threads;
  o.n_batch = batch;
  return o;
}

}  // namespace latte::cli
