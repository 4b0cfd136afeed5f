#include "convert/quantize_gguf.h"

#include <cstring>
#include <optional>

#include "convert/imatrix.h"
#include "convert/page_release.h"
#include "convert/progress.h"
#include "ggml-like/gguf/gguf.h"
#include "ggml-like/quant/quant.h"

namespace latte::convert {
namespace {

struct Job {
  const ggl::TensorInfo* in;
  ggl::Type type;
  bool copy;
  const float* importance = nullptr;  // ne0 weights per matrix, or nullptr
};

std::vector<int64_t> dims(const ggl::TensorInfo& t) { return std::vector<int64_t>(t.ne, t.ne + t.n_dims); }

// The importance of each tensor to quantize, checked against the model: every entry must name one
// of its tensors, with ne0 weights per matrix (llama.cpp, too, ignores token_embd's, whose
// product the imatrix tool never sees as a matmul).
void attach_importance(const ImportanceMatrix& im, const ggl::GgufFile& in, std::vector<Job>& jobs,
                       const std::function<void(std::string_view)>& notice) {
  for (const auto& [name, values] : im.entries())
    if (!in.find_tensor(name))
      ggl::fail("{}: importance matrix entry '{}' is not a tensor of {} (an importance matrix for another model?)",
                im.path(), name, in.path());
  size_t missing = 0;
  std::string first_missing;
  for (Job& j : jobs) {
    if (j.copy || !ggl::traits(j.type).quantized) continue;
    const ggl::TensorInfo& t = *j.in;
    const std::vector<float>* v = im.find(t.name);
    if (!v) {
      if (missing++ == 0) first_missing = t.name;
      continue;
    }
    const int64_t want = t.ne[0] * t.ne[2] * t.ne[3];
    if (static_cast<int64_t>(v->size()) != want) {
      if (t.name == "token_embd.weight") {
        notice(fmt::format("ignoring the importance matrix's {} weights for token_embd.weight", v->size()));
        continue;
      }
      ggl::fail("{}: importance matrix entry '{}' has {} weights, but the tensor needs {} ({} per matrix)", im.path(),
                t.name, v->size(), want, t.ne[0]);
    }
    j.importance = v->data();
  }
  for (const Job& j : jobs)
    if (!j.copy && !j.importance && needs_importance(j.type, j.in->name))
      ggl::fail(
          "{}: no importance matrix entry for tensor {}, which is {} (llama.cpp refuses to quantize it without one)",
          im.path(), j.in->name, ggl::type_name(j.type));
  if (missing > 0)
    notice(
        fmt::format("{} quantized tensor(s) have no importance matrix entry (first: {}); they are quantized "
                    "without one",
                    missing, first_missing));
}

// Every tensor's type and importance, decided before anything is written so that refusals come
// before any output (quantize_gguf and plan_quantization share it).
struct Prepared {
  std::optional<ImportanceMatrix> imatrix;
  std::vector<Job> jobs;
  std::vector<std::string> notices;  // reported after a successful write
  WriteReport report;
  uint64_t total = 0;
};

Prepared prepare(const QuantizeOptions& o, const ggl::GgufFile& in) {
  Prepared p;
  auto notice = [&p](std::string_view msg) { p.notices.emplace_back(msg); };
  if (!o.imatrix_path.empty()) {
    p.imatrix = ImportanceMatrix::load(o.imatrix_path);
    // As llama-quantize: an importance matrix whose selection leaves nothing is no importance matrix.
    p.imatrix->select(o.include_weights, o.exclude_weights);
    if (p.imatrix->entries().empty()) {
      notice(fmt::format("{}: --include-weights / --exclude-weights leave no entry; quantizing without it",
                         o.imatrix_path));
      p.imatrix.reset();
    }
  } else if (!o.include_weights.empty() || !o.exclude_weights.empty()) {
    ggl::fail("--include-weights / --exclude-weights select importance matrix entries: they need --imatrix");
  }

  std::vector<RecipeTensor> recipe_tensors;
  for (const ggl::TensorInfo& t : in.tensors()) {
    const bool keep = !ggl::is_weight_type(t.type) || (t.name == "output.weight" && o.leave_output_tensor);
    recipe_tensors.push_back({t.name, dims(t), !keep});
  }
  RecipeOptions recipe = o.recipe;
  recipe.has_imatrix = p.imatrix.has_value();
  const std::vector<TensorTypeChoice> choices =
      choose_tensor_types(o.file_type, RecipeModel::from_metadata(in.metadata(), in.path()), recipe_tensors, recipe);
  check_writable(choices, recipe_tensors, recipe.has_imatrix);

  for (size_t i = 0; i < in.tensors().size(); ++i) {
    const ggl::TensorInfo& t = in.tensors()[i];
    if (!choices[i].notice.empty()) notice(choices[i].notice);
    const ggl::Type type = recipe_tensors[i].quantize ? choices[i].type : t.type;
    Job j{&t, type, type == t.type};
    if (!j.copy && ggl::traits(t.type).quantized && !o.allow_requantize)
      ggl::fail("{}: tensor '{}' is already {}; pass --allow-requantize to re-quantize it to {} (quality loss)",
                o.input_path, t.name, ggl::type_name(t.type), ggl::type_name(j.type));
    p.total += ggl::row_bytes(j.type, t.ne[0]) * static_cast<uint64_t>(t.ne[1] * t.ne[2] * t.ne[3]);
    p.report.per_type[std::string(ggl::type_name(j.type))]++;
    p.jobs.push_back(j);
  }
  if (p.imatrix) attach_importance(*p.imatrix, in, p.jobs, notice);
  p.report.n_tensors = p.jobs.size();
  p.report.bytes = p.total;
  return p;
}

}  // namespace

std::vector<PlannedQuantTensor> plan_quantization(const QuantizeOptions& o) {
  const ggl::GgufFile in(o.input_path);
  const Prepared p = prepare(o, in);
  std::vector<PlannedQuantTensor> plan;
  for (const Job& j : p.jobs)
    plan.push_back(
        {j.in->name, dims(*j.in), j.in->type, j.type, j.in->nbytes,
         ggl::row_bytes(j.type, j.in->ne[0]) * static_cast<uint64_t>(j.in->ne[1] * j.in->ne[2] * j.in->ne[3]),
         j.importance != nullptr && ggl::quantizer_uses_importance(j.type)});
  for (const std::string& n : p.notices) convert::report_notice(o.on_notice, "latte quantize", n);
  return plan;
}

WriteReport quantize_gguf(const QuantizeOptions& o) {
  ggl::GgufFile in(o.input_path);
  Prepared prepared = prepare(o, in);
  const std::optional<ImportanceMatrix>& imatrix = prepared.imatrix;
  const std::vector<Job>& jobs = prepared.jobs;
  WriteReport& report = prepared.report;
  const uint64_t total = prepared.total;

  ggl::GgufWriter writer(static_cast<uint32_t>(in.alignment()));
  ggl::Metadata& md = writer.metadata();
  for (const auto& [key, value] : in.metadata().entries()) md.set(key, value);
  md.set("general.file_type", ggl::Value{o.file_type.id});
  if (ggl::traits(o.file_type.base).quantized) md.set("general.quantization_version", ggl::Value{uint32_t{2}});
  if (imatrix) imatrix->add_metadata(md);

  Progress progress(jobs.size(), total, o.progress);
  for (const Job& j : jobs) {
    const ggl::TensorInfo* t = j.in;
    writer.add_tensor(t->name, j.type, dims(*t), [t, j, &o, &progress](uint8_t* dst, size_t nbytes) {
      if (j.copy) {
        std::memcpy(dst, t->data, nbytes);
        // GgufFile(path) maps the file read-only, so pages can be dropped once read; the data
        // section starts at data - offset.
        release_file_pages(t->data, t->nbytes, t->data - t->offset);
      } else {
        const size_t in_row = ggl::row_bytes(t->type, t->ne[0]);
        const ggl::Type in_type = t->type;
        const int64_t ne0 = t->ne[0];
        const uint8_t* src = t->data;
        encode_rows(
            j.type, ne0, t->ne[1] * t->ne[2] * t->ne[3],
            [=](int64_t first, int64_t count, float* out) {
              const uint8_t* rows = src + static_cast<size_t>(first) * in_row;
              for (int64_t r = 0; r < count; ++r)
                ggl::dequantize_row(in_type, rows + static_cast<size_t>(r) * in_row, out + r * ne0, ne0);
              release_file_pages(rows, static_cast<size_t>(count) * in_row, src - t->offset);
            },
            dst, RowImportance{j.importance, t->ne[1]}, o.quantizer);
      }
      progress.tensor_done(t->name, nbytes);
    });
  }
  writer.write(o.output_path);
  progress.finish();
  for (const std::string& n : prepared.notices) convert::report_notice(o.on_notice, "latte quantize", n);

  report.seconds = progress.elapsed_seconds();
  report.peak_rss = peak_rss_bytes();
  return report;
}

}  // namespace latte::convert
