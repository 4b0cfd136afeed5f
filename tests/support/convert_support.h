// Helpers for the conversion tests: writing safetensors files and small random Hugging Face
// checkpoints, and independent reference forward passes computed straight from the Hugging Face
// tensors with the Hugging Face modelling semantics (rotate-half RoPE for Llama; DeepSeek's
// interleaved rotary dims, YaRN, MLA and MoE gate as in modeling_deepseek.py). Plain loops in
// double precision: slow, obvious, and independent of the engine and the converter.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ggml-like/core/fp16.h"
#include "ggml-like/gguf/gguf.h"
#include "tests/support/tokenizer_util.h"

namespace latte::convert_test {

namespace fs = std::filesystem;
using nlohmann::json;

// A fresh, empty directory under the test temp dir.
inline fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::path(::testing::TempDir()) / ("latte-convert-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Deterministic uniform numbers in [-1, 1) (no dependence on the library's distributions).
class Rng {
 public:
  explicit Rng(uint32_t seed) : gen_(seed) {}
  float uniform() { return static_cast<float>((gen_() >> 8) * (1.0 / 16777216.0) * 2.0 - 1.0); }

 private:
  std::mt19937 gen_;
};

struct HfTensor {
  std::vector<int64_t> shape;  // row-major, slowest first
  std::vector<float> data;
  int64_t numel() const { return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>()); }
};

// Tensors in insertion order (shards are cut in this order).
struct HfWeights {
  std::vector<std::string> order;
  std::map<std::string, HfTensor> by_name;

  void add(const std::string& name, HfTensor t) {
    order.push_back(name);
    by_name[name] = std::move(t);
  }
  const HfTensor& at(const std::string& name) const { return by_name.at(name); }
  const float* data(const std::string& name) const { return by_name.at(name).data.data(); }
};

enum class Dtype { F32, F16, BF16 };
inline const char* dtype_text(Dtype d) { return d == Dtype::F32 ? "F32" : d == Dtype::F16 ? "F16" : "BF16"; }

// Rounds to what the dtype stores, so that references computed from `w` see the stored values.
inline void round_to(Dtype d, std::vector<float>& v) {
  for (float& x : v) {
    if (d == Dtype::F16) x = ggl::fp16_to_f32(ggl::f32_to_fp16(x));
    if (d == Dtype::BF16) x = ggl::bf16_to_f32(ggl::f32_to_bf16(x));
  }
}

// One safetensors file holding `names` from `w`. The header is padded with spaces to a multiple
// of 8 bytes, as the reference writer does, unless `header_pad` says otherwise.
inline void write_safetensors(const fs::path& path, const HfWeights& w, const std::vector<std::string>& names, Dtype d,
                              int header_pad = 8) {
  json header = json::object();
  std::string data;
  for (const std::string& n : names) {
    const HfTensor& t = w.at(n);
    const size_t begin = data.size();
    for (float x : t.data) {
      if (d == Dtype::F32) {
        data.append(reinterpret_cast<const char*>(&x), 4);
      } else {
        uint16_t h = d == Dtype::F16 ? ggl::f32_to_fp16(x) : ggl::f32_to_bf16(x);
        data.append(reinterpret_cast<const char*>(&h), 2);
      }
    }
    header[n] = {{"dtype", dtype_text(d)}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string h = header.dump();
  while (header_pad > 1 && h.size() % header_pad != 0) h += ' ';
  const uint64_t len = h.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << h << data;
}

// A Hugging Face checkpoint directory: config.json and the weights as one model.safetensors, or as
// n_shards shards with model.safetensors.index.json. Rounds `w` to the stored dtype.
inline void write_checkpoint(const fs::path& dir, const json& config, HfWeights& w, Dtype d, int n_shards = 1) {
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << config.dump(2);
  for (auto& [name, t] : w.by_name) round_to(d, t.data);
  if (n_shards <= 1) {
    write_safetensors(dir / "model.safetensors", w, w.order, d);
    return;
  }
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  const size_t per = (w.order.size() + n_shards - 1) / n_shards;
  for (int s = 0; s < n_shards; ++s) {
    std::vector<std::string> names(w.order.begin() + std::min(w.order.size(), s * per),
                                   w.order.begin() + std::min(w.order.size(), (s + 1) * per));
    const std::string file = "model-" + std::string(5 - std::to_string(s + 1).size(), '0') + std::to_string(s + 1) +
                             "-of-" + std::string(5 - std::to_string(n_shards).size(), '0') + std::to_string(n_shards) +
                             ".safetensors";
    write_safetensors(dir / file, w, names, d);
    for (const std::string& n : names) index["weight_map"][n] = file;
  }
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
}

// Metadata values equal in type and value; floats compared bitwise (a -0.0 score must stay -0.0).
inline bool same_value(const ggl::Value& a, const ggl::Value& b) {
  if (a.type() != b.type()) return false;
  if (const auto* x = std::get_if<ggl::Array>(&a.data)) {
    const auto& y = std::get<ggl::Array>(b.data);
    if (x->element_type != y.element_type || x->items.size() != y.items.size()) return false;
    for (size_t i = 0; i < x->items.size(); ++i)
      if (!same_value(x->items[i], y.items[i])) return false;
    return true;
  }
  if (const auto* f = std::get_if<float>(&a.data)) return std::memcmp(f, &std::get<float>(b.data), 4) == 0;
  if (const auto* d = std::get_if<double>(&a.data)) return std::memcmp(d, &std::get<double>(b.data), 8) == 0;
  return std::visit(
      [&](const auto& x) -> bool {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, ggl::Array>)
          return false;
        else
          return x == std::get<T>(b.data);
      },
      a.data);
}

inline json read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

using latte::testing::read_file;
using latte::testing::read_vocab_ids;
using latte::testing::read_vocab_texts;

// ---- random weights ------------------------------------------------------------------------

inline HfTensor random_matrix(Rng& rng, int64_t rows, int64_t cols, float scale = 0) {
  HfTensor t{{rows, cols}, std::vector<float>(static_cast<size_t>(rows * cols))};
  // Uniform with the variance of 1/fan_in: activations keep their size through the layers.
  const float s = scale > 0 ? scale : std::sqrt(3.0f / static_cast<float>(cols));
  for (float& x : t.data) x = s * rng.uniform();
  return t;
}

inline HfTensor random_vector(Rng& rng, int64_t n, float center, float spread) {
  HfTensor t{{n}, std::vector<float>(static_cast<size_t>(n))};
  for (float& x : t.data) x = center + spread * rng.uniform();
  return t;
}

inline void add_mlp(HfWeights& w, Rng& rng, const std::string& prefix, int64_t n_embd, int64_t n_ff) {
  w.add(prefix + "gate_proj.weight", random_matrix(rng, n_ff, n_embd));
  w.add(prefix + "up_proj.weight", random_matrix(rng, n_ff, n_embd));
  w.add(prefix + "down_proj.weight", random_matrix(rng, n_embd, n_ff));
}

// Random weights for a DeepSeek V2/V3 config (with `extra_layers` multi-token-prediction style
// layers past num_hidden_layers, which a converter must skip).
inline HfWeights random_deepseek(const json& c, uint32_t seed, int extra_layers = 0) {
  Rng rng(seed);
  HfWeights w;
  const int64_t V = c["vocab_size"], E = c["hidden_size"], L = c["num_hidden_layers"], H = c["num_attention_heads"];
  const int64_t nope = c["qk_nope_head_dim"], rope = c["qk_rope_head_dim"], vd = c["v_head_dim"];
  const int64_t kvl = c["kv_lora_rank"], ff = c["intermediate_size"], mff = c["moe_intermediate_size"];
  const int64_t nexp = c["n_routed_experts"], nsh = c["n_shared_experts"], dense = c["first_k_dense_replace"];
  w.add("model.embed_tokens.weight", random_matrix(rng, V, E, 1.0f));
  for (int64_t il = 0; il < L + extra_layers; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    w.add(p + "input_layernorm.weight", random_vector(rng, E, 1.0f, 0.2f));
    if (c["q_lora_rank"].is_null()) {
      w.add(p + "self_attn.q_proj.weight", random_matrix(rng, H * (nope + rope), E));
    } else {
      const int64_t ql = c["q_lora_rank"];
      w.add(p + "self_attn.q_a_proj.weight", random_matrix(rng, ql, E));
      w.add(p + "self_attn.q_a_layernorm.weight", random_vector(rng, ql, 1.0f, 0.2f));
      w.add(p + "self_attn.q_b_proj.weight", random_matrix(rng, H * (nope + rope), ql));
    }
    w.add(p + "self_attn.kv_a_proj_with_mqa.weight", random_matrix(rng, kvl + rope, E));
    w.add(p + "self_attn.kv_a_layernorm.weight", random_vector(rng, kvl, 1.0f, 0.2f));
    w.add(p + "self_attn.kv_b_proj.weight", random_matrix(rng, H * (nope + vd), kvl));
    w.add(p + "self_attn.o_proj.weight", random_matrix(rng, E, H * vd));
    w.add(p + "post_attention_layernorm.weight", random_vector(rng, E, 1.0f, 0.2f));
    if (il < dense) {
      add_mlp(w, rng, p + "mlp.", E, ff);
      continue;
    }
    w.add(p + "mlp.gate.weight", random_matrix(rng, nexp, E));
    if (c.value("topk_method", "") == "noaux_tc")
      // Small enough that biased sigmoid scores stay positive: modeling_deepseek masks dropped
      // groups with 0, which only equals excluding them while every score is positive.
      w.add(p + "mlp.gate.e_score_correction_bias", random_vector(rng, nexp, 0.0f, 0.1f));
    for (int64_t e = 0; e < nexp; ++e) add_mlp(w, rng, p + "mlp.experts." + std::to_string(e) + ".", E, mff);
    if (nsh > 0) add_mlp(w, rng, p + "mlp.shared_experts.", E, mff * nsh);
    if (il >= L) {  // what V3's multi-token-prediction layer adds
      w.add(p + "enorm.weight", random_vector(rng, E, 1.0f, 0.2f));
      w.add(p + "eh_proj.weight", random_matrix(rng, E, 2 * E));
    }
  }
  w.add("model.norm.weight", random_vector(rng, E, 1.0f, 0.2f));
  w.add("lm_head.weight", random_matrix(rng, V, E));
  return w;
}

inline HfWeights random_llama(const json& c, uint32_t seed) {
  Rng rng(seed);
  HfWeights w;
  const int64_t V = c["vocab_size"], E = c["hidden_size"], L = c["num_hidden_layers"], H = c["num_attention_heads"];
  const int64_t KV = c["num_key_value_heads"], ff = c["intermediate_size"], hd = E / H;
  w.add("model.embed_tokens.weight", random_matrix(rng, V, E, 1.0f));
  for (int64_t il = 0; il < L; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    w.add(p + "input_layernorm.weight", random_vector(rng, E, 1.0f, 0.2f));
    w.add(p + "self_attn.q_proj.weight", random_matrix(rng, H * hd, E));
    w.add(p + "self_attn.k_proj.weight", random_matrix(rng, KV * hd, E));
    w.add(p + "self_attn.v_proj.weight", random_matrix(rng, KV * hd, E));
    w.add(p + "self_attn.o_proj.weight", random_matrix(rng, E, H * hd));
    w.add(p + "post_attention_layernorm.weight", random_vector(rng, E, 1.0f, 0.2f));
    add_mlp(w, rng, p + "mlp.", E, ff);
  }
  w.add("model.norm.weight", random_vector(rng, E, 1.0f, 0.2f));
  if (!c.value("tie_word_embeddings", false)) w.add("lm_head.weight", random_matrix(rng, V, E));
  return w;
}

// ---- reference forward passes ----------------------------------------------------------------

using Vec = std::vector<double>;

// y = W x for a Hugging Face Linear weight W [rows][cols].
inline Vec linear(const HfTensor& W, const Vec& x) {
  const int64_t rows = W.shape[0], cols = W.shape[1];
  Vec y(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(W.data[r * cols + c]) * x[c];
    y[r] = s;
  }
  return y;
}

inline Vec rms_norm(const Vec& x, const HfTensor& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w.data[i];
  return y;
}

inline double silu(double x) { return x / (1.0 + std::exp(-x)); }

inline Vec mlp(const HfWeights& w, const std::string& p, const Vec& x) {
  Vec g = linear(w.at(p + "gate_proj.weight"), x), u = linear(w.at(p + "up_proj.weight"), x);
  for (size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * u[i];
  return linear(w.at(p + "down_proj.weight"), g);
}

// Rotate-half RoPE on the first `dim` values of v (Hugging Face's apply_rotary_pos_emb):
// v * cos + rotate_half(v) * sin, where cos/sin repeat the per-frequency angles twice.
inline void rope_rotate_half(double* v, int64_t dim, const std::vector<double>& inv_freq, int64_t pos,
                             double mscale = 1.0) {
  const int64_t half = dim / 2;
  std::vector<double> out(static_cast<size_t>(dim));
  for (int64_t i = 0; i < dim; ++i) {
    const double angle = static_cast<double>(pos) * inv_freq[i % half];
    const double rotated = i < half ? -v[i + half] : v[i - half];
    out[i] = v[i] * std::cos(angle) * mscale + rotated * std::sin(angle) * mscale;
  }
  std::copy(out.begin(), out.end(), v);
}

inline std::vector<double> default_inv_freq(int64_t dim, double base) {
  std::vector<double> f(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) f[i] = 1.0 / std::pow(base, static_cast<double>(2 * i) / dim);
  return f;
}

// Causal softmax attention of one head over positions 0..t.
inline void attend(const std::vector<Vec>& q, const std::vector<Vec>& k, const std::vector<Vec>& v, double scale,
                   size_t t, double* out) {
  std::vector<double> s(t + 1);
  double mx = -1e300;
  for (size_t j = 0; j <= t; ++j) {
    double d = 0;
    for (size_t i = 0; i < q[t].size(); ++i) d += q[t][i] * k[j][i];
    s[j] = d * scale;
    mx = std::max(mx, s[j]);
  }
  double z = 0;
  for (double& x : s) z += (x = std::exp(x - mx));
  for (size_t i = 0; i < v[0].size(); ++i) {
    double acc = 0;
    for (size_t j = 0; j <= t; ++j) acc += s[j] / z * v[j][i];
    out[i] = acc;
  }
}

// Logits [T][vocab] of a Llama checkpoint, as transformers' LlamaForCausalLM computes them.
inline std::vector<double> llama_reference(const json& c, const HfWeights& w, const std::vector<int32_t>& tokens) {
  const int64_t V = c["vocab_size"], E = c["hidden_size"], L = c["num_hidden_layers"], H = c["num_attention_heads"];
  const int64_t KV = c["num_key_value_heads"], hd = E / H;
  const double eps = c["rms_norm_eps"], base = c.value("rope_theta", 10000.0);
  const size_t T = tokens.size();
  const std::vector<double> inv_freq = default_inv_freq(hd, base);
  std::vector<Vec> h(T, Vec(static_cast<size_t>(E)));
  for (size_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < E; ++i) h[t][i] = w.data("model.embed_tokens.weight")[tokens[t] * E + i];
  for (int64_t il = 0; il < L; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    std::vector<std::vector<Vec>> q(H), k(KV), v(KV);
    for (size_t t = 0; t < T; ++t) {
      Vec x = rms_norm(h[t], w.at(p + "input_layernorm.weight"), eps);
      Vec qa = linear(w.at(p + "self_attn.q_proj.weight"), x), ka = linear(w.at(p + "self_attn.k_proj.weight"), x),
          va = linear(w.at(p + "self_attn.v_proj.weight"), x);
      for (int64_t hh = 0; hh < H; ++hh) {
        rope_rotate_half(qa.data() + hh * hd, hd, inv_freq, static_cast<int64_t>(t));
        q[hh].emplace_back(qa.begin() + hh * hd, qa.begin() + (hh + 1) * hd);
      }
      for (int64_t hh = 0; hh < KV; ++hh) {
        rope_rotate_half(ka.data() + hh * hd, hd, inv_freq, static_cast<int64_t>(t));
        k[hh].emplace_back(ka.begin() + hh * hd, ka.begin() + (hh + 1) * hd);
        v[hh].emplace_back(va.begin() + hh * hd, va.begin() + (hh + 1) * hd);
      }
    }
    for (size_t t = 0; t < T; ++t) {
      Vec att(static_cast<size_t>(H * hd));
      for (int64_t hh = 0; hh < H; ++hh) {
        const int64_t g = hh / (H / KV);  // grouped-query: heads share KV heads in blocks
        attend(q[hh], k[g], v[g], 1.0 / std::sqrt(static_cast<double>(hd)), t, att.data() + hh * hd);
      }
      Vec o = linear(w.at(p + "self_attn.o_proj.weight"), att);
      for (int64_t i = 0; i < E; ++i) h[t][i] += o[i];
      Vec m = mlp(w, p + "mlp.", rms_norm(h[t], w.at(p + "post_attention_layernorm.weight"), eps));
      for (int64_t i = 0; i < E; ++i) h[t][i] += m[i];
    }
  }
  const HfTensor& head =
      c.value("tie_word_embeddings", false) ? w.at("model.embed_tokens.weight") : w.at("lm_head.weight");
  std::vector<double> logits;
  for (size_t t = 0; t < T; ++t) {
    Vec y = linear(head, rms_norm(h[t], w.at("model.norm.weight"), eps));
    logits.insert(logits.end(), y.begin(), y.end());
  }
  (void)V;
  return logits;
}

// DeepSeek's YaRN (DeepseekV2YarnRotaryEmbedding): interpolated and extrapolated frequencies
// blended by a linear ramp over the correction range.
inline std::vector<double> yarn_inv_freq(int64_t dim, double base, double factor, double orig_ctx,
                                         double beta_fast = 32, double beta_slow = 1) {
  auto corr_dim = [&](double rot) { return (dim * std::log(orig_ctx / (rot * 2 * M_PI))) / (2 * std::log(base)); };
  double low = std::max(std::floor(corr_dim(beta_fast)), 0.0);
  double high = std::min(std::ceil(corr_dim(beta_slow)), static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  std::vector<double> f(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const double extra = 1.0 / std::pow(base, static_cast<double>(2 * i) / dim);
    const double inter = extra / factor;
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double mask = 1.0 - ramp;
    f[i] = inter * (1 - mask) + extra * mask;
  }
  return f;
}

inline double yarn_get_mscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// DeepSeek's MoE gate: the chosen experts and their weights for one token.
inline std::vector<std::pair<int64_t, double>> deepseek_route(const json& c, const HfWeights& w, const std::string& p,
                                                              const Vec& x, bool v3) {
  const int64_t nexp = c["n_routed_experts"], k = c["num_experts_per_tok"];
  Vec logits = linear(w.at(p + "mlp.gate.weight"), x);
  Vec scores(logits.size());
  if (c.value("scoring_func", "softmax") == "sigmoid") {
    for (size_t i = 0; i < logits.size(); ++i) scores[i] = 1.0 / (1.0 + std::exp(-logits[i]));
  } else {
    const double mx = *std::max_element(logits.begin(), logits.end());
    double z = 0;
    for (size_t i = 0; i < logits.size(); ++i) z += (scores[i] = std::exp(logits[i] - mx));
    for (double& s : scores) s /= z;
  }
  Vec choice = scores;
  if (w.by_name.count(p + "mlp.gate.e_score_correction_bias"))
    for (int64_t e = 0; e < nexp; ++e) choice[e] += w.data(p + "mlp.gate.e_score_correction_bias")[e];
  // V3 group-limited selection: groups ranked by the sum of their two best choice scores.
  const int64_t n_group = c.value("n_group", 1), topk_group = c.value("topk_group", n_group);
  if (v3 && n_group > 1) {
    const int64_t gs = nexp / n_group;
    std::vector<std::pair<double, int64_t>> gscore;
    for (int64_t g = 0; g < n_group; ++g) {
      std::vector<double> m(choice.begin() + g * gs, choice.begin() + (g + 1) * gs);
      std::sort(m.rbegin(), m.rend());
      gscore.push_back({m[0] + (gs > 1 ? m[1] : 0.0), g});
    }
    std::stable_sort(gscore.begin(), gscore.end(), [](auto& a, auto& b) { return a.first > b.first; });
    std::vector<bool> keep(static_cast<size_t>(n_group), false);
    for (int64_t i = 0; i < topk_group; ++i) keep[gscore[i].second] = true;
    for (int64_t e = 0; e < nexp; ++e)
      if (!keep[e / gs]) choice[e] = 0.0;  // masked_fill(~mask, 0.0), as modeling_deepseek does
  }
  std::vector<int64_t> idx(static_cast<size_t>(nexp));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return choice[a] > choice[b]; });
  std::vector<std::pair<int64_t, double>> out;
  double sum = 0;
  for (int64_t i = 0; i < k; ++i) out.push_back({idx[i], scores[idx[i]]}), sum += scores[idx[i]];
  const bool norm = k > 1 && c.value("norm_topk_prob", false);
  const double scale = c.value("routed_scaling_factor", 1.0);
  for (auto& [e, wt] : out) {
    if (norm) wt /= sum + 1e-20;
    // V2 scales only when it does not normalise; V3 always scales.
    if (v3 || !norm) wt *= scale;
  }
  return out;
}

// Logits [T][vocab] of a DeepSeek V2/V3 checkpoint as modeling_deepseek.py computes them.
inline std::vector<double> deepseek_reference(const json& c, const HfWeights& w, const std::vector<int32_t>& tokens,
                                              bool v3) {
  const int64_t E = c["hidden_size"], L = c["num_hidden_layers"], H = c["num_attention_heads"];
  const int64_t nope = c["qk_nope_head_dim"], rope = c["qk_rope_head_dim"], vd = c["v_head_dim"];
  const int64_t kvl = c["kv_lora_rank"], dense = c["first_k_dense_replace"], nsh = c["n_shared_experts"];
  const double eps = c["rms_norm_eps"], base = c.value("rope_theta", 10000.0);
  const size_t T = tokens.size();
  double softmax_scale = 1.0 / std::sqrt(static_cast<double>(nope + rope));
  std::vector<double> inv_freq = default_inv_freq(rope, base);
  double rope_mscale = 1.0;
  if (c.contains("rope_scaling") && !c["rope_scaling"].is_null()) {
    const json& rs = c["rope_scaling"];
    const double factor = rs["factor"];
    inv_freq = yarn_inv_freq(rope, base, factor, rs["original_max_position_embeddings"].get<double>(),
                             rs.value("beta_fast", 32.0), rs.value("beta_slow", 1.0));
    const double mscale_all = rs.value("mscale_all_dim", 0.0);
    rope_mscale = yarn_get_mscale(factor, rs.value("mscale", 1.0)) / yarn_get_mscale(factor, mscale_all);
    if (mscale_all != 0.0) softmax_scale *= yarn_get_mscale(factor, mscale_all) * yarn_get_mscale(factor, mscale_all);
  }
  // DeepSeek stores rotary dims interleaved; the modelling code reorders them to rotate-half
  // order (evens first, then odds) before applying the usual rotation.
  auto apply_rope = [&](double* v, int64_t pos) {
    std::vector<double> tmp(static_cast<size_t>(rope));
    for (int64_t i = 0; i < rope / 2; ++i) tmp[i] = v[2 * i], tmp[i + rope / 2] = v[2 * i + 1];
    rope_rotate_half(tmp.data(), rope, inv_freq, pos, rope_mscale);
    std::copy(tmp.begin(), tmp.end(), v);
  };

  std::vector<Vec> h(T, Vec(static_cast<size_t>(E)));
  for (size_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < E; ++i) h[t][i] = w.data("model.embed_tokens.weight")[tokens[t] * E + i];
  for (int64_t il = 0; il < L; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    std::vector<std::vector<Vec>> q(H), k(H), v(H);
    for (size_t t = 0; t < T; ++t) {
      Vec x = rms_norm(h[t], w.at(p + "input_layernorm.weight"), eps);
      Vec qf = c["q_lora_rank"].is_null() ? linear(w.at(p + "self_attn.q_proj.weight"), x)
                                          : linear(w.at(p + "self_attn.q_b_proj.weight"),
                                                   rms_norm(linear(w.at(p + "self_attn.q_a_proj.weight"), x),
                                                            w.at(p + "self_attn.q_a_layernorm.weight"), eps));
      Vec kv_a = linear(w.at(p + "self_attn.kv_a_proj_with_mqa.weight"), x);
      Vec latent(kv_a.begin(), kv_a.begin() + kvl);
      Vec k_pe(kv_a.begin() + kvl, kv_a.end());
      apply_rope(k_pe.data(), static_cast<int64_t>(t));
      Vec kv = linear(w.at(p + "self_attn.kv_b_proj.weight"),
                      rms_norm(latent, w.at(p + "self_attn.kv_a_layernorm.weight"), eps));
      for (int64_t hh = 0; hh < H; ++hh) {
        double* qh = qf.data() + hh * (nope + rope);
        apply_rope(qh + nope, static_cast<int64_t>(t));
        q[hh].emplace_back(qh, qh + nope + rope);
        Vec kh(kv.begin() + hh * (nope + vd), kv.begin() + hh * (nope + vd) + nope);
        kh.insert(kh.end(), k_pe.begin(), k_pe.end());
        k[hh].push_back(kh);
        v[hh].emplace_back(kv.begin() + hh * (nope + vd) + nope, kv.begin() + (hh + 1) * (nope + vd));
      }
    }
    for (size_t t = 0; t < T; ++t) {
      Vec att(static_cast<size_t>(H * vd));
      for (int64_t hh = 0; hh < H; ++hh) attend(q[hh], k[hh], v[hh], softmax_scale, t, att.data() + hh * vd);
      Vec o = linear(w.at(p + "self_attn.o_proj.weight"), att);
      for (int64_t i = 0; i < E; ++i) h[t][i] += o[i];
      Vec x = rms_norm(h[t], w.at(p + "post_attention_layernorm.weight"), eps);
      Vec m(static_cast<size_t>(E), 0.0);
      if (il < dense) {
        m = mlp(w, p + "mlp.", x);
      } else {
        for (auto [e, wt] : deepseek_route(c, w, p, x, v3)) {
          Vec y = mlp(w, p + "mlp.experts." + std::to_string(e) + ".", x);
          for (int64_t i = 0; i < E; ++i) m[i] += wt * y[i];
        }
        if (nsh > 0) {
          Vec y = mlp(w, p + "mlp.shared_experts.", x);
          for (int64_t i = 0; i < E; ++i) m[i] += y[i];
        }
      }
      for (int64_t i = 0; i < E; ++i) h[t][i] += m[i];
    }
  }
  std::vector<double> logits;
  for (size_t t = 0; t < T; ++t) {
    Vec y = linear(w.at("lm_head.weight"), rms_norm(h[t], w.at("model.norm.weight"), eps));
    logits.insert(logits.end(), y.begin(), y.end());
  }
  return logits;
}

}  // namespace latte::convert_test
