#include "convert/tensor_plan.h"

#include <algorithm>

namespace latte::convert {
namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

bool is_float_dtype(StDtype d) { return d == StDtype::F32 || d == StDtype::F16 || d == StDtype::BF16; }

}  // namespace

int64_t PlannedTensor::rows() const {
  int64_t r = 1;
  for (size_t i = 1; i < ne.size(); ++i) r *= ne[i];
  return r;
}

int64_t PlannedTensor::n_elements() const { return rows() * ne[0]; }

const StTensor& CheckpointTensors::take(const std::string& name, const std::vector<int64_t>& shape) {
  const StTensor& t = ckpt_.get(name);
  if (!is_float_dtype(t.dtype))
    ggl::fail("{}: tensor '{}' has dtype {}; latte converts F32, F16 and BF16 weights", t.file->path(), name,
              dtype_name(t.dtype));
  if (t.shape != shape)
    ggl::fail("{}: tensor '{}' has shape {}, but config.json implies {}", t.file->path(), name, t.shape_text(),
              shape_text(shape));
  used_.insert(name);
  return t;
}

void CheckpointTensors::check_all_used(const std::string& arch) const {
  for (const StTensor* t : ckpt_.all())
    if (!used_.count(t->name))
      ggl::fail("{}: unexpected tensor '{}' {} for a {} checkpoint with this config.json", t->file->path(), t->name,
                t->shape_text(), arch);
}

PlannedTensor plan_copy(std::string name, const StTensor& t) {
  PlannedTensor p;
  p.name = std::move(name);
  p.ne.assign(t.shape.rbegin(), t.shape.rend());
  if (p.ne.empty()) p.ne = {1};
  const StTensor* src = &t;
  const int64_t ne0 = p.ne[0];
  p.fill = [src, ne0](int64_t first, int64_t count, float* dst) { read_f32_once(*src, first * ne0, count * ne0, dst); };
  return p;
}

PlannedTensor plan_merge_experts(std::string name, std::vector<const StTensor*> experts) {
  PlannedTensor p;
  p.name = std::move(name);
  const int64_t rows = experts.at(0)->shape.at(0), cols = experts[0]->shape.at(1);
  p.ne = {cols, rows, static_cast<int64_t>(experts.size())};
  p.fill = [experts, rows, cols](int64_t first, int64_t count, float* dst) {
    // Output row r is row (r % rows) of expert (r / rows); copy runs that stay within one expert.
    for (int64_t r = first; r < first + count;) {
      const int64_t e = r / rows, local = r % rows;
      const int64_t n = std::min(rows - local, first + count - r);
      read_f32_once(*experts[e], local * cols, n * cols, dst + (r - first) * cols);
      r += n;
    }
  };
  return p;
}

PlannedTensor plan_rope_permuted(std::string name, const StTensor& t, int64_t n_head) {
  PlannedTensor p = plan_copy(std::move(name), t);
  const int64_t rows = t.shape.at(0), cols = t.shape.at(1);
  if (n_head <= 0 || rows % n_head != 0 || (rows / n_head) % 2 != 0)
    ggl::fail("{}: tensor '{}' has {} rows, not {} heads of an even head size", t.file->path(), t.name, rows, n_head);
  const int64_t hd = rows / n_head;
  const StTensor* src = &t;
  p.fill = [src, hd, cols](int64_t first, int64_t count, float* dst) {
    for (int64_t r = first; r < first + count; ++r) {
      const int64_t h = r / hd, i = r % hd, j = i / 2, k = i % 2;
      read_f32_once(*src, (h * hd + k * (hd / 2) + j) * cols, cols, dst + (r - first) * cols);
    }
  };
  return p;
}

PlannedTensor plan_kv_b_to_k_b(std::string name, const StTensor& kv_b, int64_t n_head, int64_t nope, int64_t v) {
  PlannedTensor p;
  p.name = std::move(name);
  const int64_t kv_lora = kv_b.shape.at(1);
  p.ne = {nope, kv_lora, n_head};
  const StTensor* src = &kv_b;
  p.fill = [src, kv_lora, nope, v](int64_t first, int64_t count, float* dst) {
    // Output row (h, c) holds column c of head h's nope block: transpose one head block at a time.
    std::vector<float> block(static_cast<size_t>(nope * kv_lora));
    int64_t loaded = -1;
    for (int64_t r = first; r < first + count; ++r) {
      const int64_t h = r / kv_lora, c = r % kv_lora;
      if (h != loaded) {
        read_f32_once(*src, h * (nope + v) * kv_lora, nope * kv_lora, block.data());
        loaded = h;
      }
      float* out = dst + (r - first) * nope;
      for (int64_t n = 0; n < nope; ++n) out[n] = block[static_cast<size_t>(n * kv_lora + c)];
    }
  };
  return p;
}

PlannedTensor plan_kv_b_to_v_b(std::string name, const StTensor& kv_b, int64_t n_head, int64_t nope, int64_t v) {
  PlannedTensor p;
  p.name = std::move(name);
  const int64_t kv_lora = kv_b.shape.at(1);
  p.ne = {kv_lora, v, n_head};
  const StTensor* src = &kv_b;
  p.fill = [src, kv_lora, nope, v](int64_t first, int64_t count, float* dst) {
    for (int64_t r = first; r < first + count; ++r) {
      const int64_t h = r / v, j = r % v;
      read_f32_once(*src, (h * (nope + v) + nope + j) * kv_lora, kv_lora, dst + (r - first) * kv_lora);
    }
  };
  return p;
}

}  // namespace latte::convert
