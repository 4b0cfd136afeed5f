// A routed-expert block for the CPU backend's tests (paged weights, expert parallelism): stacked
// expert weights with a copy full of NaNs for the leaves that must not be read, and the block
// down(swiglu(gate x, up x)) over T tokens routed to k of E experts.
#pragma once
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/graph/graph.h"
#include "ggml-like/quant/quant.h"

namespace latte::testing {

using ggl::Graph;
using ggl::Tensor;
using ggl::Type;

// Stacked expert weights [K, N, E] of one type: the real bytes, and a copy of the same size full
// of NaN bit patterns for the leaf.
struct Stack {
  Type type;
  int64_t K, N, E;
  std::vector<uint8_t> real, poison;
  size_t slice_bytes() const { return ggl::row_bytes(type, K) * static_cast<size_t>(N); }
};
inline Stack make_stack(Type type, int64_t K, int64_t N, int64_t E, uint32_t seed) {
  Stack s{type, K, N, E, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::vector<float> row(static_cast<size_t>(K));
  const size_t rb = ggl::row_bytes(type, K);
  s.real.resize(rb * static_cast<size_t>(N * E));
  for (int64_t r = 0; r < N * E; ++r) {
    for (float& v : row) v = normal(rng);
    if (type == Type::F32)
      std::memcpy(s.real.data() + r * rb, row.data(), rb);
    else
      ggl::quantize_row(type, row.data(), s.real.data() + r * rb, K);
  }
  s.poison.assign(s.real.size(), 0xFF);  // 0xFFFF: a NaN as fp16 scale, as float bits too
  return s;
}

// The routed experts of T tokens, k_used of E each: down(swiglu(gate x, up x)).
struct Experts {
  int64_t K = 256, F = 256, E = 6, k_used = 2, T;
  Type type;
  Stack gate, up, down;
  std::vector<float> x;
  std::vector<int32_t> ids;
  Experts(Type t, int64_t tokens)
      : T(tokens),
        type(t),
        gate(make_stack(t, K, F, E, 1)),
        up(make_stack(t, K, F, E, 2)),
        down(make_stack(t, F, K, E, 3)) {
    std::mt19937 rng(4);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    x.resize(static_cast<size_t>(K * T));
    for (float& v : x) v = normal(rng);
    // Experts 0..E-2 only (E-1 is never named), two different ones per token.
    for (int64_t t = 0; t < T; ++t) {
      ids.push_back(static_cast<int32_t>(t % (E - 1)));
      ids.push_back(static_cast<int32_t>((t + 2) % (E - 1)));
    }
  }
  std::set<int32_t> named() const { return {ids.begin(), ids.end()}; }

  // Runs the block on `backend`, the leaves on the real weights or on the poisoned ones; with
  // `only`, the products compute the pairs routed to those experts, and an expert_exchange node
  // (the backend's exchange) completes the rows; with `split`, an expert_send node sends them first
  // and a product of x runs between the two.
  std::vector<float> run(ggl::CpuBackend& backend, bool poisoned, ggl::ExpertRange only = {}, bool split = false) {
    Graph g;
    const auto leaf = [&](Stack& s, const char* name) {
      return g.external(s.type, std::vector<int64_t>{s.K, s.N, s.E}, poisoned ? s.poison.data() : s.real.data(), name);
    };
    Tensor* xt = g.external(Type::F32, std::vector<int64_t>{K, 1, T}, x.data(), "x");
    Tensor* it = g.external(Type::I32, std::vector<int64_t>{k_used, T}, ids.data(), "ids");
    Tensor* h =
        g.swiglu(g.mul_mat_id(leaf(gate, "gate_exps"), xt, it, only), g.mul_mat_id(leaf(up, "up_exps"), xt, it, only));
    Tensor* out = g.mul_mat_id(leaf(down, "down_exps"), h, it, only);
    if (!only.all(E)) {
      Tensor* sent = split ? g.expert_send(out, it, {only, E}) : nullptr;
      if (split) g.mark_output(g.mul_mat_id(leaf(up, "up_exps"), xt, it));  // work while the rows travel
      out = g.expert_exchange(out, it, {only, E}, sent);
    }
    g.mark_output(out);
    backend.compute(g);
    const auto* p = static_cast<const float*>(out->data);
    return {p, p + out->n_elements()};
  }

  // Data parallelism: this process's tokens are [first, first + n) of the T; a token_gather node
  // gathers the others' (the backend's exchange), the products compute the pairs routed to the
  // experts `only` for every token, and a gathered expert_exchange completes the rows of this
  // process's tokens, which are returned [K, k, n].
  std::vector<float> run_gathered(ggl::CpuBackend& backend, ggl::ExpertRange only, int64_t first, int64_t n) {
    Graph g;
    const auto leaf = [&](Stack& s, const char* name) {
      return g.external(s.type, std::vector<int64_t>{s.K, s.N, s.E}, s.real.data(), name);
    };
    Tensor* mine = n == 0 ? nullptr : g.external(Type::F32, std::vector<int64_t>{K, n}, x.data() + first * K, "x");
    Tensor* xt = g.reshape(g.token_gather(mine, K, first, T), {K, 1, T, 1});
    Tensor* it = g.external(Type::I32, std::vector<int64_t>{k_used, T}, ids.data(), "ids");
    Tensor* h =
        g.swiglu(g.mul_mat_id(leaf(gate, "gate_exps"), xt, it, only), g.mul_mat_id(leaf(up, "up_exps"), xt, it, only));
    Tensor* out = g.expert_exchange(g.mul_mat_id(leaf(down, "down_exps"), h, it, only), it, {only, E, true});
    g.mark_output(out);
    backend.compute(g);
    const auto* p = static_cast<const float*>(out->data) + first * k_used * K;
    return {p, p + n * k_used * K};
  }
};

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace latte::testing
