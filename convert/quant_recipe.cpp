#include "convert/quant_recipe.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <initializer_list>
#include <numeric>

#include "convert/text.h"
#include "ggml-like/core/error.h"
#include "ggml-like/core/types.h"
#include "ggml-like/quant/quant.h"

namespace latte::convert {
namespace {

using ggl::Type;

// llama_ftype values (llama.h): they are what general.file_type holds.
enum Ftype : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 7,
  kQ5_0 = 8,
  kQ5_1 = 9,
  kQ2_K = 10,
  kQ3_K_S = 11,
  kQ3_K_M = 12,
  kQ3_K_L = 13,
  kQ4_K_S = 14,
  kQ4_K_M = 15,
  kQ5_K_S = 16,
  kQ5_K_M = 17,
  kQ6_K = 18,
  kIQ2_XXS = 19,
  kIQ2_XS = 20,
  kIQ3_XS = 22,
  kIQ3_XXS = 23,
  kIQ1_S = 24,
  kIQ4_NL = 25,
  kIQ3_S = 26,
  kIQ3_M = 27,
  kIQ2_S = 28,
  kIQ2_M = 29,
  kIQ4_XS = 30,
  kIQ1_M = 31,
  kBF16 = 32,
};

// clang-format off
constexpr FileType kFileTypes[] = {
    {"f32", kF32, Type::F32},          {"f16", kF16, Type::F16},        {"bf16", kBF16, Type::BF16},
    {"q8_0", kQ8_0, Type::Q8_0},       {"q4_0", kQ4_0, Type::Q4_0},     {"q4_1", kQ4_1, Type::Q4_1},
    {"q5_0", kQ5_0, Type::Q5_0},       {"q5_1", kQ5_1, Type::Q5_1},     {"q2_k", kQ2_K, Type::Q2_K},
    {"q3_k_s", kQ3_K_S, Type::Q3_K},   {"q3_k_m", kQ3_K_M, Type::Q3_K}, {"q3_k_l", kQ3_K_L, Type::Q3_K},
    {"q4_k_s", kQ4_K_S, Type::Q4_K},   {"q4_k_m", kQ4_K_M, Type::Q4_K}, {"q5_k_s", kQ5_K_S, Type::Q5_K},
    {"q5_k_m", kQ5_K_M, Type::Q5_K},   {"q6_k", kQ6_K, Type::Q6_K},     {"iq4_nl", kIQ4_NL, Type::IQ4_NL},
    {"iq4_xs", kIQ4_XS, Type::IQ4_XS},
    // The i-quant mixes below 4 bits; iq2_s's base is IQ2_XS and iq2_m's IQ2_S, as in llama.cpp.
    {"iq1_s", kIQ1_S, Type::IQ1_S},
    {"iq1_m", kIQ1_M, Type::IQ1_M},
    {"iq2_xxs", kIQ2_XXS, Type::IQ2_XXS},
    {"iq2_xs", kIQ2_XS, Type::IQ2_XS},
    {"iq2_s", kIQ2_S, Type::IQ2_XS},
    {"iq2_m", kIQ2_M, Type::IQ2_S},
    {"iq3_xxs", kIQ3_XXS, Type::IQ3_XXS},
    {"iq3_xs", kIQ3_XS, Type::IQ3_S},
    {"iq3_s", kIQ3_S, Type::IQ3_S},
    {"iq3_m", kIQ3_M, Type::IQ3_S},
};

// The tensor types latte writes (for the per-tensor flags).
constexpr Type kTensorTypes[] = {Type::F32,     Type::F16,    Type::BF16,   Type::Q8_0,    Type::Q4_0,
                                 Type::Q4_1,    Type::Q5_0,   Type::Q5_1,   Type::Q2_K,    Type::Q3_K,
                                 Type::Q4_K,    Type::Q5_K,   Type::Q6_K,   Type::IQ4_NL,  Type::IQ4_XS,
                                 Type::IQ1_S,   Type::IQ1_M,  Type::IQ2_XXS, Type::IQ2_XS, Type::IQ2_S,
                                 Type::IQ3_XXS, Type::IQ3_S};
// clang-format on

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The N of "blk.N.", or -1.
int layer_of(const std::string& name) {
  int layer = -1;
  return std::sscanf(name.c_str(), "blk.%d.", &layer) == 1 ? layer : -1;
}

bool fits(Type t, int64_t ne0) { return ne0 % ggl::traits(t).block_size == 0; }

// llama.cpp's layer pattern for the mixes: the first and last eighth, and every third between.
bool use_more_bits(int i_layer, int n_layer) {
  return i_layer < n_layer / 8 || i_layer >= 7 * n_layer / 8 || (i_layer - n_layer / 8) % 3 == 2;
}

// The type a tensor whose rows do not divide into `t`'s blocks takes instead.
TensorTypeChoice fallback(const std::string& name, int64_t ne0, Type t) {
  if (fits(t, ne0)) return {t, ""};
  Type fb = ggl::is_grid_iquant(t) ? Type::IQ4_NL : Type::F16;
  switch (t) {
    case Type::Q2_K:
    case Type::Q3_K:
    case Type::IQ4_XS: fb = Type::IQ4_NL; break;
    case Type::Q4_K: fb = Type::Q5_0; break;
    case Type::Q5_K: fb = Type::Q5_1; break;
    case Type::Q6_K: fb = Type::Q8_0; break;
    default: break;
  }
  if (!fits(fb, ne0)) fb = Type::F16;
  return {fb, fmt::format("{}: rows of {} are not a multiple of {}, stored as {} instead of {}", name, ne0,
                          ggl::traits(t).block_size, ggl::type_name(fb), ggl::type_name(t))};
}

bool one_of(uint32_t ft, std::initializer_list<uint32_t> fts) {
  return std::find(fts.begin(), fts.end(), ft) != fts.end();
}

// The i-quant mixes of 1 and 2 bits, which have their own branch of llama_tensor_get_type.
bool very_low_bits(uint32_t ft) { return one_of(ft, {kIQ2_XXS, kIQ2_XS, kIQ1_S, kIQ2_S, kIQ2_M, kIQ1_M}); }

// llama_tensor_get_type for the file types latte writes: the mix's choice for one tensor, with
// the counters it keeps across tensors (visited by layer, then name).
class Mix {
 public:
  Mix(const FileType& ft, const RecipeModel& m, const std::vector<RecipeTensor>& tensors, bool has_imatrix)
      : ft_(ft.id), model_(m), has_imatrix_(has_imatrix) {
    for (const RecipeTensor& t : tensors) {
      if (contains(t.name, "attn_v.weight") || contains(t.name, "attn_qkv.weight") ||
          contains(t.name, "attn_kv_b.weight"))
        ++n_attention_wv_;
      if (t.name == "output.weight") has_output_ = true;
    }
    // Without <arch>.block_count, the layers the tensor names mention.
    n_layer_ = static_cast<int>(m.n_layer);
    if (n_layer_ <= 0)
      for (const RecipeTensor& t : tensors) n_layer_ = std::max(n_layer_, layer_of(t.name) + 1);
    n_gqa_ = m.n_head_kv > 0 ? m.n_head / m.n_head_kv : 1;
    // llama.cpp's LLM_TYPE_70B (Llama 2/3 70B): 80 layers with grouped KV heads.
    is_70b_ = m.arch == "llama" && m.n_expert != 8 && m.n_layer == 80 && m.n_head != m.n_head_kv;
  }

  bool tied_embedding(const std::string& name) const { return !has_output_ && name == "token_embd.weight"; }

  Type pick(const RecipeTensor& t, Type type, const std::optional<Type>& output_tensor_type) {
    const std::string& name = t.name;
    if (name == "output.weight" || tied_embedding(name)) {
      if (output_tensor_type) return *output_tensor_type;
      if (!fits(type, t.ne[0])) return Type::Q8_0;
      if (very_low_bits(ft_) || ft_ == kIQ3_XXS) return Type::Q5_K;
      return type == Type::Q8_0 ? type : Type::Q6_K;
    }
    if (name == "token_embd.weight") {
      if (one_of(ft_, {kIQ2_XXS, kIQ2_XS, kIQ1_S, kIQ1_M})) return Type::Q2_K;
      if (one_of(ft_, {kIQ2_S, kIQ2_M, kIQ3_XXS})) return Type::IQ3_S;
      return type;
    }
    if (very_low_bits(ft_)) return very_low_bits_pick(name, type);
    if (contains(name, "attn_v.weight")) return attn_v(type);
    if (contains(name, "attn_k.weight") || contains(name, "attn_q.weight")) {
      if (model_.n_expert == 8 && contains(name, "attn_k.weight")) return Type::Q8_0;
      if (ft_ == kIQ3_XS) return Type::IQ3_XXS;
      if (ft_ == kIQ3_XXS) return Type::IQ2_S;
      return type;
    }
    if (contains(name, "ffn_down")) return ffn_down(name, type);
    if (contains(name, "attn_output.weight")) return attn_output(type);
    if (contains(name, "attn_qkv.weight")) {
      if (ft_ == kQ3_K_M || ft_ == kQ3_K_L || ft_ == kIQ3_M) return Type::Q4_K;
      if (ft_ == kQ4_K_M) return Type::Q5_K;
      if (ft_ == kQ5_K_M) return Type::Q6_K;
      return type;
    }
    // ffn_gate* and ffn_up*: IQ3_XS takes IQ3_XXS outside the first and last eighth of the layers.
    const bool gate = contains(name, "ffn_gate");
    if (gate || contains(name, "ffn_up")) {
      const int i = layer_index(name, gate ? i_ffn_gate_ : i_ffn_up_);
      if (ft_ == kIQ3_XS && i >= n_layer_ / 8 && i < 7 * n_layer_ / 8) return Type::IQ3_XXS;
    }
    return type;
  }

 private:
  // The layer of a per-layer tensor (ffn_down, ffn_gate, ffn_up): the count of such tensors seen so
  // far, or with experts the layer in the name (experts need not be consecutive).
  int layer_index(const std::string& name, int& counter) const {
    int i = counter++;
    if (model_.n_expert > 1) {
      i = layer_of(name);
      if (i < 0 || i >= n_layer_) ggl::fail("cannot tell the layer (of {}) of tensor {}", n_layer_, name);
    }
    return i;
  }

  // The 1- and 2-bit mixes keep a few tensors at 2 to 4 bits (their ffn_down counter counts
  // tensors, experts or not).
  Type very_low_bits_pick(const std::string& name, Type type) {
    const bool s_or_m = ft_ == kIQ2_S || ft_ == kIQ2_M;
    if (contains(name, "attn_v.weight")) {
      ++i_attention_wv_;
      if (n_gqa_ >= 4 || model_.n_expert >= 4) return Type::Q4_K;
      return s_or_m ? Type::IQ3_S : Type::Q2_K;
    }
    if (model_.n_expert == 8 && contains(name, "attn_k.weight")) return Type::Q4_K;
    if (contains(name, "ffn_down")) {
      if (i_ffn_down_++ < n_layer_ / 8) return s_or_m ? Type::IQ3_S : Type::Q2_K;
      return type;
    }
    if (contains(name, "attn_output.weight")) {
      if (model_.n_expert == 8) return Type::Q5_K;
      if (ft_ == kIQ1_S || ft_ == kIQ1_M) return Type::IQ2_XXS;
      if (s_or_m) return Type::IQ3_S;
    }
    return type;
  }

  Type attn_v(Type type) {
    const int i = i_attention_wv_++;
    if (ft_ == kQ2_K)
      type = n_gqa_ >= 4 ? Type::Q4_K : Type::Q3_K;
    else if (ft_ == kIQ3_XXS)
      type = n_gqa_ >= 4 ? Type::Q4_K : !has_imatrix_ ? Type::IQ3_S : Type::IQ3_XXS;
    else if ((ft_ == kIQ3_XS || ft_ == kIQ3_S) && n_gqa_ >= 4)
      type = Type::Q4_K;
    else if (ft_ == kIQ3_M)
      type = Type::Q4_K;
    else if (ft_ == kQ3_K_M)
      type = i < 2 ? Type::Q5_K : Type::Q4_K;
    else if (ft_ == kQ3_K_L)
      type = Type::Q5_K;
    else if ((ft_ == kIQ4_NL || ft_ == kIQ4_XS) && n_gqa_ >= 4)
      type = Type::Q5_K;
    else if ((ft_ == kQ4_K_M || ft_ == kQ5_K_M) && use_more_bits(i, n_attention_wv_))
      type = Type::Q6_K;
    else if (ft_ == kQ4_K_S && i < 4)
      type = Type::Q5_K;
    // 70B: eight heads share each V, so the tensor is small and more bits cost little.
    if (is_70b_ && (type == Type::Q3_K || type == Type::Q4_K)) type = Type::Q5_K;
    if (model_.n_expert == 8) type = Type::Q8_0;
    return type;
  }

  Type ffn_down(const std::string& name, Type type) {
    const int i = layer_index(name, i_ffn_down_);
    const int n = n_layer_;
    if (ft_ == kQ2_K) return Type::Q3_K;
    if (ft_ == kIQ3_XXS && !has_imatrix_) return i < n / 8 ? Type::Q4_K : Type::Q3_K;
    if (ft_ == kQ3_K_M) return i < n / 16 ? Type::Q5_K : Type::Q4_K;
    if (ft_ == kIQ3_M && (i < n / 8 || (model_.n_expert == 8 && use_more_bits(i, n)))) return Type::Q4_K;
    if (ft_ == kQ3_K_L) return Type::Q5_K;
    if (ft_ == kQ4_K_M) return use_more_bits(i, n) ? Type::Q6_K : type;
    if (i < n / 8 && (ft_ == kIQ4_NL || ft_ == kIQ4_XS) && !has_imatrix_) return Type::Q5_K;
    if (ft_ == kQ5_K_M && use_more_bits(i, n)) return Type::Q6_K;
    if (ft_ == kQ4_K_S && i < n / 8) return Type::Q5_K;
    // With an imatrix, the first ffn_down layers of Q4_0/Q5_0 get the offset variant.
    if ((ft_ == kQ4_0 || ft_ == kQ5_0) && has_imatrix_ && i < n / 8) return ft_ == kQ4_0 ? Type::Q4_1 : Type::Q5_1;
    return type;
  }

  Type attn_output(Type type) const {
    if (model_.n_expert == 8) {
      const bool more =
          one_of(ft_, {kQ2_K, kIQ3_XS, kIQ3_XXS, kQ3_K_S, kQ3_K_M, kIQ4_NL, kQ4_K_S, kQ4_K_M, kIQ3_S, kIQ3_M, kIQ4_XS});
      return more ? Type::Q5_K : type;
    }
    if (ft_ == kQ2_K) return Type::Q3_K;
    if (ft_ == kIQ3_XXS) return Type::IQ3_S;
    if (ft_ == kQ3_K_M) return Type::Q4_K;
    if (ft_ == kQ3_K_L) return Type::Q5_K;
    if (ft_ == kIQ3_M) return Type::Q4_K;
    return type;
  }

  uint32_t ft_;
  RecipeModel model_;
  bool has_imatrix_;
  bool has_output_ = false;
  bool is_70b_ = false;
  int n_layer_ = 0, n_gqa_ = 1;
  int n_attention_wv_ = 0, i_attention_wv_ = 0, i_ffn_down_ = 0, i_ffn_gate_ = 0, i_ffn_up_ = 0;
};

// An explicitly requested type must fit: there is no fallback for what the user asked for.
Type exact(const RecipeTensor& t, Type type, std::string_view what) {
  if (!fits(type, t.ne[0]))
    ggl::fail("{} {}: tensor {} has rows of {}, not a multiple of {}", what, ggl::type_name(type), t.name, t.ne[0],
              ggl::traits(type).block_size);
  return type;
}

}  // namespace

std::optional<FileType> find_file_type(std::string_view name) {
  const std::string n = lower(name);
  for (const FileType& f : kFileTypes)
    if (f.name == n) return f;
  return std::nullopt;
}

FileType require_file_type(std::string_view name, std::string_view what) {
  const std::optional<FileType> f = find_file_type(name);
  if (!f) ggl::fail("{} '{}' is not one of {}", what, name, file_type_names());
  return *f;
}

std::string file_type_names() {
  std::string s;
  for (const FileType& f : kFileTypes) s += (s.empty() ? "" : ", ") + std::string(f.name);
  return s;
}

std::string file_type_help() {
  return "file type (llama.cpp's names): " + file_type_names() +
         "; the K-quant mixes give output, some attn_v and ffn_down tensors more bits; norms, biases and the "
         "expert router stay f32";
}

std::optional<FileType> file_type_of_base(Type t) {
  for (const FileType& f : kFileTypes)
    if (f.base == t && (f.name == ggl::type_name(t))) return f;
  return std::nullopt;
}

ggl::Type require_tensor_type(std::string_view name, std::string_view what) {
  const std::optional<Type> t = ggl::type_from_name(name);
  if (!t || std::find(std::begin(kTensorTypes), std::end(kTensorTypes), *t) == std::end(kTensorTypes)) {
    std::string names;
    for (Type x : kTensorTypes) names += (names.empty() ? "" : ", ") + std::string(ggl::type_name(x));
    ggl::fail("{} '{}' is not one of {}", what, name, names);
  }
  return *t;
}

RecipeModel RecipeModel::from_metadata(const ggl::Metadata& md, std::string_view path) {
  RecipeModel m;
  m.arch = md.get_or<std::string>("general.architecture", "");
  if (m.arch.empty()) ggl::fail("{}: no general.architecture", path);
  const std::string p = m.arch + ".";
  m.n_layer = md.get_or<int64_t>(p + "block_count", 0);
  m.n_expert = md.get_or<int64_t>(p + "expert_count", 0);
  m.n_head = md.get_or<int64_t>(p + "attention.head_count", 1);
  m.n_head_kv = md.get_or<int64_t>(p + "attention.head_count_kv", m.n_head);
  if (m.n_layer < 0) ggl::fail("{}: {}block_count is negative", path, p);
  return m;
}

TensorTypeOverride parse_tensor_type_override(std::string_view spec) {
  const size_t eq = spec.rfind('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == spec.size())
    ggl::fail("--tensor-type '{}' is not REGEX=TYPE", spec);
  TensorTypeOverride o;
  o.pattern = lower(spec.substr(0, eq));
  try {
    o.regex = std::regex(o.pattern);
  } catch (const std::regex_error& e) {
    ggl::fail("--tensor-type '{}': bad regular expression ({})", spec, e.what());
  }
  o.type = require_tensor_type(spec.substr(eq + 1), "--tensor-type " + std::string(spec) + ": type");
  return o;
}

void check_writable(const std::vector<TensorTypeChoice>& choices, const std::vector<RecipeTensor>& tensors,
                    bool has_imatrix) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].quantize) continue;
    const Type t = choices[i].type;
    if (!has_imatrix && needs_importance(t, tensors[i].name))
      ggl::fail("tensor {}: type {} needs an importance matrix (--imatrix; llama.cpp refuses without one)",
                tensors[i].name, ggl::type_name(t));
    if (!ggl::is_weight_type(t))
      ggl::fail("tensor {}: type {} has no quantizer in this build", tensors[i].name, ggl::type_name(t));
  }
}

bool needs_importance(Type t, std::string_view name) {
  if (t == Type::IQ1_M) return name != "token_embd.weight" && name != "output.weight";
  return t == Type::IQ1_S || t == Type::IQ2_XXS || t == Type::IQ2_XS || t == Type::IQ2_S;
}

bool keeps_f32(std::string_view name, const std::vector<int64_t>& ne) {
  int n_dims = 0;
  for (size_t i = 0; i < ne.size(); ++i)
    if (ne[i] > 1) n_dims = static_cast<int>(i) + 1;
  // The router is tiny and its logits pick the experts: quantizing it changes which experts run.
  return n_dims <= 1 || name.ends_with("ffn_gate_inp.weight");
}

std::vector<TensorTypeChoice> choose_tensor_types(const FileType& ft, const RecipeModel& model,
                                                  const std::vector<RecipeTensor>& tensors, const RecipeOptions& o) {
  // llama.cpp visits the tensors sorted by layer (non-layer tensors first), then by name.
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int la = layer_of(tensors[a].name), lb = layer_of(tensors[b].name);
    return la != lb ? la < lb : tensors[a].name < tensors[b].name;
  });

  Mix mix(ft, model, tensors, o.has_imatrix);
  const bool quantized = ggl::traits(ft.base).quantized;
  std::vector<TensorTypeChoice> out(tensors.size(), TensorTypeChoice{ft.base, ""});
  for (size_t idx : order) {
    const RecipeTensor& t = tensors[idx];
    TensorTypeChoice& c = out[idx];
    if (!t.quantize) continue;
    if (keeps_f32(t.name, t.ne)) {
      c.type = Type::F32;
      continue;
    }
    if (t.name == "token_embd.weight" && o.token_embedding_type) {
      c.type = exact(t, *o.token_embedding_type, "--token-embedding-type");
      continue;
    }
    if (t.name == "output.weight" && o.output_tensor_type) {
      c.type = exact(t, *o.output_tensor_type, "--output-tensor-type");
      continue;
    }
    Type type = ft.base;
    if (quantized) {
      const std::string lname = lower(t.name);
      const auto manual = std::find_if(o.tensor_types.begin(), o.tensor_types.end(),
                                       [&](const TensorTypeOverride& x) { return std::regex_search(lname, x.regex); });
      if (manual != o.tensor_types.end())
        type = manual->type;
      else if (!o.pure)
        type = mix.pick(t, type, o.output_tensor_type);
    }
    c = fallback(t.name, t.ne[0], type);
    if (!c.notice.empty() && o.pure) ggl::fail("tensor {} (--pure forbids falling back to another type)", c.notice);
  }
  return out;
}

}  // namespace latte::convert
