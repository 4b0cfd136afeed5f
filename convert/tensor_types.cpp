#include "convert/tensor_types.h"

#include <algorithm>
#include <cstring>

#include "ggml-like/core/error.h"
#include "ggml-like/quant/quant.h"

namespace latte::convert {
namespace {

constexpr ggl::Type kOutputTypes[] = {ggl::Type::F32,  ggl::Type::F16,  ggl::Type::BF16,
                                      ggl::Type::Q8_0, ggl::Type::Q4_0, ggl::Type::Q4_1};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::optional<ggl::Type> parse_output_type(std::string_view name) {
  std::optional<ggl::Type> t = ggl::type_from_name(name);
  if (!t || std::find(std::begin(kOutputTypes), std::end(kOutputTypes), *t) == std::end(kOutputTypes))
    return std::nullopt;
  return t;
}

std::string output_type_names() {
  std::string s;
  for (ggl::Type t : kOutputTypes) s += (s.empty() ? "" : ", ") + std::string(ggl::type_name(t));
  return s;
}

ggl::Type require_output_type(std::string_view name, std::string_view what) {
  const std::optional<ggl::Type> t = parse_output_type(name);
  if (!t) ggl::fail("{} '{}' is not one of {}", what, name, output_type_names());
  return *t;
}

std::string weight_type_help() {
  return "type of the 2-D/3-D weights: " + output_type_names() + " (norms, biases and the expert router stay f32)";
}

uint32_t file_type_for(ggl::Type t) {
  switch (t) {
    case ggl::Type::F32: return 0;   // LLAMA_FTYPE_ALL_F32
    case ggl::Type::F16: return 1;   // LLAMA_FTYPE_MOSTLY_F16
    case ggl::Type::Q4_0: return 2;  // LLAMA_FTYPE_MOSTLY_Q4_0
    case ggl::Type::Q4_1: return 3;  // LLAMA_FTYPE_MOSTLY_Q4_1
    case ggl::Type::Q8_0: return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    case ggl::Type::BF16: return 32; // LLAMA_FTYPE_MOSTLY_BF16
    default: ggl::fail("no general.file_type for tensor type {}", ggl::type_name(t));
  }
}

bool keeps_f32(std::string_view name, const std::vector<int64_t>& ne) {
  int n_dims = 0;
  for (size_t i = 0; i < ne.size(); ++i)
    if (ne[i] > 1) n_dims = static_cast<int>(i) + 1;
  // The router is tiny and its logits pick the experts: quantizing it changes which experts run.
  return n_dims <= 1 || ends_with(name, "ffn_gate_inp.weight");
}

TypeChoice choose_type(std::string_view name, const std::vector<int64_t>& ne, ggl::Type wanted) {
  if (keeps_f32(name, ne)) return {ggl::Type::F32, ""};
  const int block = ggl::traits(wanted).block_size;
  if (ne[0] % block != 0)
    return {ggl::Type::F16, fmt::format("{}: rows of {} are not a multiple of {}, stored as f16 instead of {}", name,
                                        ne[0], block, ggl::type_name(wanted))};
  return {wanted, ""};
}

void encode_rows(ggl::Type t, int64_t ne0, int64_t rows, const RowFill& fill, uint8_t* dst) {
  // About 4 MiB of floats per chunk, at least one row.
  const int64_t chunk_rows = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(ne0, 1));
  const size_t rb = ggl::row_bytes(t, ne0);
  std::vector<float> buf(static_cast<size_t>(std::min(chunk_rows, rows) * ne0));
  for (int64_t r = 0; r < rows; r += chunk_rows) {
    const int64_t n = std::min(chunk_rows, rows - r);
    fill(r, n, buf.data());
    if (t == ggl::Type::F32) {
      std::memcpy(dst + static_cast<size_t>(r) * rb, buf.data(), static_cast<size_t>(n) * rb);
      continue;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      ggl::quantize_row(t, buf.data() + i * ne0, dst + static_cast<size_t>(r + i) * rb, ne0);
  }
}

}  // namespace latte::convert
