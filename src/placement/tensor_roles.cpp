#include "src/placement/tensor_roles.h"

#include <charconv>

namespace latte {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

TensorRole layer_role(std::string_view rest) {
  if (starts_with(rest, "attn_")) return TensorRole::kAttention;
  if (contains(rest, "_exps")) return TensorRole::kRoutedExperts;
  if (contains(rest, "_shexp")) return TensorRole::kSharedExpert;
  if (starts_with(rest, "ffn_gate_inp") || starts_with(rest, "exp_probs_b")) return TensorRole::kRouter;
  if (starts_with(rest, "ffn_")) return TensorRole::kDenseFfn;
  return TensorRole::kOther;
}

}  // namespace

std::string_view tensor_role_name(TensorRole r) {
  switch (r) {
    case TensorRole::kEmbedding: return "embedding";
    case TensorRole::kAttention: return "attention";
    case TensorRole::kCache: return "cache";
    case TensorRole::kDenseFfn: return "dense ffn";
    case TensorRole::kSharedExpert: return "shared expert";
    case TensorRole::kRouter: return "router";
    case TensorRole::kRoutedExperts: return "routed experts";
    case TensorRole::kOutputHead: return "output head";
    case TensorRole::kOther: return "other";
  }
  return "?";
}

PlanTensor classify_tensor(std::string name, size_t bytes) {
  PlanTensor t{std::move(name), bytes, -1, TensorRole::kOther};
  const std::string_view n = t.name;
  if (starts_with(n, "token_embd.")) {
    t.role = TensorRole::kEmbedding;
  } else if (starts_with(n, "output.") || starts_with(n, "output_norm.")) {
    t.role = TensorRole::kOutputHead;
  } else if (starts_with(n, "blk.")) {
    const size_t dot = n.find('.', 4);
    int layer = -1;
    const auto [end, ec] =
        std::from_chars(n.data() + 4, n.data() + (dot == std::string_view::npos ? n.size() : dot), layer);
    if (ec == std::errc() && dot != std::string_view::npos && end == n.data() + dot && layer >= 0) {
      t.layer = layer;
      t.role = layer_role(n.substr(dot + 1));
    }
  }
  return t;
}

std::vector<PlanTensor> classify_tensors(std::span<const ggl::TensorInfo> tensors, int64_t n_layer,
                                         size_t cache_bytes_per_layer) {
  std::vector<PlanTensor> out;
  std::vector<char> moe(static_cast<size_t>(n_layer), 0);
  for (const ggl::TensorInfo& info : tensors) {
    out.push_back(classify_tensor(info.name, info.nbytes));
    const PlanTensor& t = out.back();
    if (t.layer >= n_layer)
      out.back() = {t.name, t.bytes, -1, TensorRole::kOther};  // a layer the model lacks
    else if (t.layer >= 0 && (t.role == TensorRole::kRoutedExperts || t.role == TensorRole::kSharedExpert))
      moe[t.layer] = 1;
  }
  for (PlanTensor& t : out)
    if (t.role == TensorRole::kDenseFfn && t.layer >= 0 && moe[t.layer] && t.name.find("ffn_norm") != std::string::npos)
      t.role = TensorRole::kSharedExpert;
  for (int64_t l = 0; l < n_layer; ++l)
    out.push_back({"cache." + std::to_string(l), cache_bytes_per_layer, static_cast<int>(l), TensorRole::kCache});
  return out;
}

}  // namespace latte
