#include "convert/convert_hf.h"

#include <cstdio>
#include <filesystem>

#include "convert/progress.h"
#include "convert/tensor_types.h"
#include "ggml-like/gguf/gguf.h"
#include "ggml-like/quant/quant.h"

namespace latte::convert {

namespace fs = std::filesystem;

std::string report_text(const WriteReport& r) {
  std::string types;
  for (const auto& [name, count] : r.per_type) types += fmt::format("{}{} {}", types.empty() ? "" : ", ", count, name);
  return fmt::format("{} tensors ({}), {} in {:.2f} s, peak RSS {}", r.n_tensors, types, human_bytes(r.bytes),
                     r.seconds, human_bytes(r.peak_rss));
}

WriteReport convert_hf_checkpoint(const ConvertOptions& opts) {
  auto notice = [&](std::string_view msg) { convert::report_notice(opts.on_notice, "latte convert", msg); };
  const fs::path dir(opts.input_dir);
  if (!fs::is_directory(dir)) ggl::fail("{}: not a directory", opts.input_dir);
  const JsonObject config = JsonObject::load((dir / "config.json").string());
  const SafetensorsCheckpoint ckpt(opts.input_dir);
  ModelPlan plan = plan_model(config, ckpt, PlanOptions{opts.mla_layout});
  for (const std::string& n : plan.notices) notice(n);

  ggl::GgufWriter writer;
  ggl::Metadata& md = writer.metadata();
  std::string name = opts.name.value_or("");
  if (name.empty()) name = fs::path(opts.input_dir).lexically_normal().filename().string();
  if (name.empty() || name == ".") name = fs::absolute(dir).lexically_normal().parent_path().filename().string();
  put_str(md, "general.architecture", plan.arch);
  put_str(md, "general.name", name);
  for (const auto& [key, value] : plan.hparams.entries()) md.set(key, value);
  put_u32(md, "general.file_type", opts.file_type.id);
  if (ggl::traits(opts.file_type.base).quantized) put_u32(md, "general.quantization_version", 2);

  WriteReport report;
  report.tokenizer = add_tokenizer_metadata(opts.input_dir, config, plan.n_vocab, opts.tokenizer, md);
  if (report.tokenizer.empty()) {
    notice("no tokenizer.json: writing tokenizer.ggml.model = none (the model takes token ids only)");
    put_str(md, "tokenizer.ggml.model", "none");
    put_u32(md, plan.arch + ".vocab_size", plan.n_vocab);
  }

  // Types and sizes first, so that the progress bar knows the total.
  std::vector<RecipeTensor> recipe_tensors;
  for (const PlannedTensor& t : plan.tensors) recipe_tensors.push_back({t.name, t.ne});
  const std::vector<TensorTypeChoice> choices = choose_tensor_types(
      opts.file_type, RecipeModel::from_metadata(md, opts.input_dir), recipe_tensors, RecipeOptions{});
  check_writable(choices, recipe_tensors, false);
  std::vector<ggl::Type> types;
  std::vector<std::string> type_notices;  // reported after a successful write
  uint64_t total = 0;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const TensorTypeChoice& c = choices[i];
    if (!c.notice.empty()) type_notices.push_back(c.notice);
    types.push_back(c.type);
    total += ggl::row_bytes(c.type, plan.tensors[i].ne[0]) * static_cast<uint64_t>(plan.tensors[i].rows());
    report.per_type[std::string(ggl::type_name(c.type))]++;
  }
  Progress progress(plan.tensors.size(), total, opts.progress);
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const PlannedTensor* t = &plan.tensors[i];
    const ggl::Type type = types[i];
    writer.add_tensor(t->name, type, t->ne, [t, type, &progress](uint8_t* dst, size_t nbytes) {
      encode_rows(type, t->ne[0], t->rows(), t->fill, dst);
      progress.tensor_done(t->name, nbytes);
    });
  }
  writer.write(opts.output_path);
  progress.finish();
  for (const std::string& n : type_notices) notice(n);

  report.n_tensors = plan.tensors.size();
  report.bytes = total;
  report.seconds = progress.elapsed_seconds();
  report.peak_rss = peak_rss_bytes();
  return report;
}

}  // namespace latte::convert
