#include "convert/quantize_gguf.h"

#include <cstdio>
#include <cstring>

#include "convert/page_release.h"
#include "convert/progress.h"
#include "convert/tensor_types.h"
#include "ggml-like/gguf/gguf.h"
#include "ggml-like/quant/quant.h"

namespace latte::convert {
namespace {

// The type a tensor gets, or std::nullopt to copy it unchanged.
std::optional<ggl::Type> target_type(const QuantizeOptions& o, const ggl::TensorInfo& t,
                                     const std::function<void(std::string_view)>& notice) {
  if (!ggl::is_weight_type(t.type)) return std::nullopt;  // integer tensors and the like
  const std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
  if (t.name == "output.weight" && o.leave_output_tensor) return std::nullopt;
  if (keeps_f32(t.name, ne)) return ggl::Type::F32;
  const ggl::Type wanted = t.name == "token_embd.weight" && o.token_embedding_type ? *o.token_embedding_type : o.type;
  TypeChoice c = choose_type(t.name, ne, wanted);
  if (!c.notice.empty()) {
    if (o.pure) ggl::fail("{}: tensor {} (--pure forbids falling back to another type)", o.input_path, c.notice);
    notice(c.notice);
  }
  return c.type;
}

}  // namespace

WriteReport quantize_gguf(const QuantizeOptions& o) {
  auto notice = [&](std::string_view msg) { convert::report_notice(o.on_notice, "latte quantize", msg); };
  for (ggl::Type t : {o.type, o.token_embedding_type.value_or(o.type)})
    if (!parse_output_type(ggl::type_name(t)))
      ggl::fail("type {} is not an output type ({})", ggl::type_name(t), output_type_names());

  ggl::GgufFile in(o.input_path);
  ggl::GgufWriter writer(static_cast<uint32_t>(in.alignment()));
  ggl::Metadata& md = writer.metadata();
  for (const auto& [key, value] : in.metadata().entries()) md.set(key, value);
  md.set("general.file_type", ggl::Value{file_type_for(o.type)});
  if (ggl::traits(o.type).quantized) md.set("general.quantization_version", ggl::Value{uint32_t{2}});

  // Decide every tensor's type before writing anything, so refusals happen before any output.
  struct Job {
    const ggl::TensorInfo* in;
    ggl::Type type;
    bool copy;
  };
  std::vector<Job> jobs;
  WriteReport report;
  uint64_t total = 0;
  for (const ggl::TensorInfo& t : in.tensors()) {
    std::optional<ggl::Type> target = target_type(o, t, notice);
    Job j{&t, target.value_or(t.type), !target || *target == t.type};
    if (!j.copy && ggl::traits(t.type).quantized && !o.allow_requantize)
      ggl::fail("{}: tensor '{}' is already {}; pass --allow-requantize to re-quantize it to {} (quality loss)",
                o.input_path, t.name, ggl::type_name(t.type), ggl::type_name(j.type));
    total += ggl::row_bytes(j.type, t.ne[0]) * static_cast<uint64_t>(t.ne[1] * t.ne[2] * t.ne[3]);
    report.per_type[std::string(ggl::type_name(j.type))]++;
    jobs.push_back(j);
  }

  Progress progress(jobs.size(), total, o.progress);
  for (const Job& j : jobs) {
    const ggl::TensorInfo* t = j.in;
    std::vector<int64_t> ne(t->ne, t->ne + t->n_dims);
    writer.add_tensor(t->name, j.type, ne, [t, j, &progress](uint8_t* dst, size_t nbytes) {
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
        encode_rows(j.type, ne0, t->ne[1] * t->ne[2] * t->ne[3],
                    [=](int64_t first, int64_t count, float* out) {
                      const uint8_t* rows = src + static_cast<size_t>(first) * in_row;
                      for (int64_t r = 0; r < count; ++r)
                        ggl::dequantize_row(in_type, rows + static_cast<size_t>(r) * in_row, out + r * ne0, ne0);
                      release_file_pages(rows, static_cast<size_t>(count) * in_row, src - t->offset);
                    },
                    dst);
      }
      progress.tensor_done(t->name, nbytes);
    });
  }
  writer.write(o.output_path);
  progress.finish();

  report.n_tensors = jobs.size();
  report.bytes = total;
  report.seconds = progress.elapsed_seconds();
  report.peak_rss = peak_rss_bytes();
  return report;
}

}  // namespace latte::convert
