#include "src/synth/synth_writer.h"

#include <cstdio>
#include <vector>

#include "convert/progress.h"
#include "convert/tensor_types.h"
#include "ggml-like/core/error.h"
#include "src/synth/random_weights.h"
#include "src/synth/synth_plan.h"

namespace latte::synth {

namespace {

// A vocabulary smaller than the embedding (DeepSeek-V3's 129280 rows against the 102400 tokens of
// the DeepSeek LLM vocabulary) is padded as llama.cpp's convert_hf_to_gguf.py pads one: tokens
// "[PAD<i>]" of type UNUSED (5), score 0 where the vocabulary has scores.
void pad_vocabulary(ggl::Metadata& md, int64_t n_tokens, int64_t n_vocab, const std::string& path) {
  auto pad = [&](const char* key, auto entry) {
    const ggl::Value* v = md.find(key);
    if (!v) return;
    const auto* list = std::get_if<ggl::Array>(&v->data);
    if (!list || static_cast<int64_t>(list->items.size()) != n_tokens)
      ggl::fail("{}: {} does not hold one entry per token", path, key);
    ggl::Array padded = *list;
    for (int64_t i = n_tokens; i < n_vocab; ++i) padded.items.push_back(entry(i));
    md.set(key, ggl::Value{std::move(padded)});
  };
  pad("tokenizer.ggml.tokens", [](int64_t i) { return ggl::Value{fmt::format("[PAD{}]", i)}; });
  pad("tokenizer.ggml.token_type", [](int64_t) { return ggl::Value{int32_t{5}}; });
  pad("tokenizer.ggml.scores", [](int64_t) { return ggl::Value{0.0f}; });
}

}  // namespace

std::string copy_tokenizer(const std::string& path, int64_t n_vocab, ggl::Metadata& md) {
  const ggl::GgufFile vocab(path);
  const ggl::Metadata& src = vocab.metadata();
  const ggl::Value* tokens = src.find("tokenizer.ggml.tokens");
  const ggl::Array* list = tokens ? std::get_if<ggl::Array>(&tokens->data) : nullptr;
  if (!list) ggl::fail("{}: no tokenizer.ggml.tokens array: not a vocabulary GGUF", path);
  const auto n_tokens = static_cast<int64_t>(list->items.size());
  if (n_tokens > n_vocab)
    ggl::fail("{}: the vocabulary has {} tokens but the model's is {}", path, list->items.size(), n_vocab);
  for (const auto& [key, value] : src.entries())
    if (key.starts_with("tokenizer.")) md.set(key, value);
  if (n_tokens < n_vocab) pad_vocabulary(md, n_tokens, n_vocab, path);
  const std::string model = src.get_or<std::string>("tokenizer.ggml.model", "?");
  const std::string pre = src.get_or<std::string>("tokenizer.ggml.pre", "");
  return fmt::format("{}{}{}, {} tokens (from {})", model, pre.empty() ? "" : "/", pre, n_vocab, path);
}

SynthReport write_synthetic_model(const SynthOptions& opts) {
  auto notice = [&](std::string_view msg) { convert::report_notice(opts.on_notice, "latte synth", msg); };
  const Geometry& g = opts.geometry;
  const std::vector<SynthTensor> tensors = plan_tensors(g, opts.layout);

  ggl::GgufWriter writer;
  ggl::Metadata& md = writer.metadata();
  convert::put_str(md, "general.architecture", "deepseek2");
  convert::put_str(md, "general.name", opts.name.empty() ? g.title + " (synthetic)" : opts.name);
  add_hparams(g, opts.layout, md);
  convert::put_u32(md, "general.file_type", opts.file_type.id);
  if (ggl::traits(opts.file_type.base).quantized) convert::put_u32(md, "general.quantization_version", 2);

  SynthReport report;
  report.n_params = parameter_count(tensors);
  if (opts.vocab_path.empty()) {
    convert::put_str(md, "tokenizer.ggml.model", "none");  // token ids only
  } else {
    report.write.tokenizer = copy_tokenizer(opts.vocab_path, g.n_vocab, md);
  }

  std::vector<convert::RecipeTensor> recipe_tensors;
  for (const SynthTensor& t : tensors) recipe_tensors.push_back({t.name, t.ne});
  convert::RecipeOptions recipe;
  recipe.pure = opts.pure;
  recipe.tensor_types = opts.tensor_types;
  const std::vector<convert::TensorTypeChoice> choices = convert::choose_tensor_types(
      opts.file_type, convert::RecipeModel::from_metadata(md, "synth"), recipe_tensors, recipe);
  // The types llama.cpp's quantizer refuses without an importance matrix get a uniform one: the
  // random weights have no preferred input columns, so uniform is what a calibration text would
  // measure on average.
  convert::check_writable(choices, recipe_tensors, true);
  std::vector<ggl::Type> types;
  std::vector<std::string> type_notices;  // reported after a successful write
  uint64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const convert::TensorTypeChoice& c = choices[i];
    if (!c.notice.empty()) type_notices.push_back(c.notice);
    types.push_back(c.type);
    total += ggl::row_bytes(c.type, tensors[i].ne[0]) * static_cast<uint64_t>(tensors[i].rows());
    report.write.per_type[std::string(ggl::type_name(c.type))]++;
  }
  convert::Progress progress(tensors.size(), total, opts.progress);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const SynthTensor* t = &tensors[i];
    const ggl::Type type = types[i];
    const uint64_t seed = opts.seed;
    writer.add_tensor(t->name, type, t->ne, [t, type, seed, &progress](uint8_t* dst, size_t nbytes) {
      const RandomWeights random(seed, *t);
      std::vector<float> uniform;
      if (convert::needs_importance(type, t->name)) uniform.assign(static_cast<size_t>(t->ne[0]), 1.0f);
      convert::encode_rows(type, t->ne[0], t->rows(),
                           [&random](int64_t first, int64_t count, float* rows) { random.fill(first, count, rows); },
                           dst, {uniform.empty() ? nullptr : uniform.data(), t->rows()});
      progress.tensor_done(t->name, nbytes);
    });
  }
  writer.write(opts.output_path);
  progress.finish();
  for (const std::string& n : type_notices) notice(n);

  report.write.n_tensors = tensors.size();
  report.write.bytes = total;
  report.write.seconds = progress.elapsed_seconds();
  report.write.peak_rss = convert::peak_rss_bytes();
  return report;
}

}  // namespace latte::synth
