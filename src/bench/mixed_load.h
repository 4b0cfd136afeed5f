// The serving step of DeepSeek's MLA measurements that issue 26 reproduces: 16 sequences decoding
// with 50..400 cached tokens while 4 requests read their prompts (64 / 128 / 256 / 256 new tokens
// after 512 / 0 / 0 / 256 cached ones), all in one BatchSession. Each step carries one token of
// every decoding sequence and then chunks of the prompts, first come first, within n_batch tokens.
// Measured: each prompt's time to first token (from the first of these steps to the end of the
// step that read its last token, whose logits give the first token), the decoders' tokens per
// second over those steps, and their rate over as many steps without the prompts. The cached
// tokens are evaluated first, untimed; every token id is random from a fixed seed.
#pragma once
#include <cstdint>
#include <vector>

#include "src/model/model.h"
#include "src/runtime/session.h"

namespace latte::bench {

struct PromptRequest {
  int64_t cached = 0, fresh = 0;  // tokens already in its cache, and to read now
  double ttft = 0;                // seconds
};

struct MixedLoadOptions {
  std::vector<PromptRequest> prompts{{512, 64, 0}, {0, 128, 0}, {0, 256, 0}, {256, 256, 0}};
  std::vector<int64_t> decoder_cached;  // empty: 16 sequences, 50 to 400 cached tokens
  int64_t n_batch = 2048;               // -b: most tokens per step
  SessionOptions session;               // cache type, threads, MLA mode, --deterministic
};

struct MixedLoadResult {
  std::vector<PromptRequest> prompts;  // with their ttft
  std::vector<int64_t> decoder_cached;
  int64_t steps = 0;   // steps until every prompt was read
  double t_mixed = 0;  // their seconds
  double t_alone = 0;  // seconds of as many steps of the decoders alone
  double decode_speed_mixed() const { return t_mixed > 0 ? decoded() / t_mixed : 0; }
  double decode_speed_alone() const { return t_alone > 0 ? decoded() / t_alone : 0; }
  double decoded() const { return static_cast<double>(decoder_cached.size() * static_cast<size_t>(steps)); }
};

// Throws ggl::Error for a non-positive n_batch, a batch too small for one token of every decoder
// and a prompt chunk, or empty prompts.
MixedLoadResult run_mixed_load(const Model& model, const MixedLoadOptions& options);

}  // namespace latte::bench
