// Every op of every backend besides the CPU, against the CPU backend, one table of cases: the
// inputs are uploaded into the backend's memory, the node runs there, the result comes back.
// Skips, saying why, where there is no such backend (a build without CUDA, or no GPU): the CUDA
// kernels have so far only been compiled, never run (docs/offload.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/registry/backend_registry.h"
#include "ggml-like/graph/graph.h"
#include "ggml-like/quant/quant.h"
#include "tests/support/random_floats.h"

namespace test_backend_ops {

using ggl::Backend;
using ggl::Graph;
using ggl::Tensor;
using ggl::Type;
using latte::testing::random_floats;
using latte::testing::weight_types;

// Makes leaves in the memory of the backend the graph will run on: l(g, ne, seed) an f32 one with
// values drawn from seed, l(g, type, ne, seed) weights of any type (rows of random values quantized
// by the reference quantizers), l.ids(g, ne, values) i32 ids.
struct Leaf {
  std::function<Tensor*(Graph&, Type, std::vector<int64_t>, uint32_t)> make;
  std::function<Tensor*(Graph&, std::vector<int64_t>, std::vector<int32_t>)> make_ids;
  Tensor* operator()(Graph& g, std::vector<int64_t> ne, uint32_t seed) const { return make(g, Type::F32, ne, seed); }
  Tensor* operator()(Graph& g, Type t, std::vector<int64_t> ne, uint32_t seed) const { return make(g, t, ne, seed); }
  Tensor* ids(Graph& g, std::vector<int64_t> ne, std::vector<int32_t> values) const { return make_ids(g, ne, values); }
};

struct OpCase {
  const char* name;
  std::function<Tensor*(Graph&, const Leaf&)> build;
  float tolerance;  // relative to the largest magnitude of the result
  // Cases over weight types instead: built by typed once per type in types.
  std::function<Tensor*(Graph&, const Leaf&, Type)> typed = {};
  std::vector<Type> types = {};
};

size_t count(const std::vector<int64_t>& ne) {
  size_t n = 1;
  for (int64_t d : ne) n *= static_cast<size_t>(d);
  return n;
}

// f32 latents [512, 3] copied into rows 2..4 of a [576, 8] cache of type t; the cache read back.
Tensor* copy_into_cache(Graph& g, const Leaf& l, Type t) {
  Tensor* cache = l(g, t, {576, 8}, 60);
  const size_t row = cache->nb[1];
  g.copy(l(g, {512, 3}, 61), g.view(cache, {512, 3, 1, 1}, {cache->nb[0], row, row * 3, row * 3}, 2 * row));
  return g.cont(cache);
}

// Absorbed MLA attention: q [576, 16, T] on a cache of n rows of type t (K the rows, V their first
// 512 values), tokens at the given positions.
Tensor* mla_decode(Graph& g, const Leaf& l, Type t, int64_t n, const std::vector<int32_t>& positions) {
  Tensor* cache = l(g, t, {576, n}, 62);
  const size_t row = cache->nb[1];
  Tensor* K = g.view(cache, {576, 1, n, 1}, {cache->nb[0], row, row, row * n}, 0);
  Tensor* V = g.view(cache, {512, 1, n, 1}, {cache->nb[0], row, row, row * n}, 0);
  // Cache rows are weight-like (0.02 to 0.1 times normal values): larger queries make the scores spread.
  Tensor* q = g.scale(l(g, {576, 16, static_cast<int64_t>(positions.size())}, 63), 20.0f);
  return g.flash_attn(q, K, V, l.ids(g, {static_cast<int64_t>(positions.size())}, positions), 0.1352f);
}

// Products with weights of type t and m columns of 512 values: 37 output rows (not a multiple of
// the kernels' rows per block). m <= 8 takes the mat-vec kernels, more the dequantize + cuBLAS path.
OpCase mul_mat_case(const char* name, int64_t m) {
  return {name, nullptr, 5e-3f,
          [m](Graph& g, const Leaf& l, Type t) {
            return g.mul_mat(l(g, t, {512, 37}, 30), l(g, {512, m}, 31));
          },
          weight_types()};
}

const std::vector<OpCase>& cases() {
  static const std::vector<OpCase> all = {
      {"rms_norm",
       [](Graph& g, const Leaf& l) {
         return g.rms_norm(l(g, {64, 7}, 1), 1e-6f);
       },
       1e-5f},
      {"add_broadcast",
       [](Graph& g, const Leaf& l) {
         return g.add(l(g, {64, 6, 2}, 2), l(g, {64, 1, 2}, 3));
       },
       1e-6f},
      {"mul_row",
       [](Graph& g, const Leaf& l) {
         return g.mul(l(g, {33, 5}, 4), l(g, {33}, 5));
       },
       1e-6f},
      {"div",
       [](Graph& g, const Leaf& l) {
         return g.div(l(g, {16, 4}, 6), g.scale(l(g, {16, 4}, 7), 3.0f));
       },
       1e-5f},
      {"silu",
       [](Graph& g, const Leaf& l) {
         return g.silu(l(g, {257, 3}, 8));
       },
       1e-5f},
      {"sigmoid",
       [](Graph& g, const Leaf& l) {
         return g.sigmoid(l(g, {257, 3}, 9));
       },
       1e-5f},
      {"swiglu",
       [](Graph& g, const Leaf& l) {
         return g.swiglu(l(g, {128, 5}, 10), l(g, {128, 5}, 11));
       },
       1e-5f},
      {"softmax",
       [](Graph& g, const Leaf& l) {
         return g.softmax(g.scale(l(g, {1000, 4}, 12), 4.0f));
       },
       1e-5f},
      {"mul_mat",
       [](Graph& g, const Leaf& l) {
         return g.mul_mat(l(g, {96, 40}, 13), l(g, {96, 9}, 14));
       },
       1e-5f},
      {"mul_mat_strided_x",
       [](Graph& g, const Leaf& l) {
         Tensor* wide = l(g, {128, 9}, 15);
         Tensor* x = g.view(wide, {96, 9, 1, 1}, {4, 128 * 4, 128 * 4 * 9, 128 * 4 * 9}, 0);
         return g.mul_mat(l(g, {96, 33}, 16), x);
       },
       1e-5f},
      // CPU products with quantized weights quantize the activations (16-bit; 8-bit in the routed
      // experts), hence the looser tolerances; a wrong row or block is off by the result's scale.
      mul_mat_case("mul_mat_w_1col", 1),
      mul_mat_case("mul_mat_w_3cols", 3),
      mul_mat_case("mul_mat_w_8cols", 8),
      mul_mat_case("mul_mat_w_40cols", 40),
      // Weights broadcast over batches of strided activations, on both paths.
      {"mul_mat_w_broadcast_5cols",
       nullptr,
       5e-3f,
       [](Graph& g, const Leaf& l, Type t) {
         Tensor* x = g.view(l(g, {300, 5, 4, 2}, 33), {256, 5, 4, 2}, {4, 300 * 4, 300 * 4 * 5, 300 * 4 * 5 * 4}, 0);
         return g.mul_mat(l(g, t, {256, 19, 2, 1}, 32), x);
       },
       {Type::F32, Type::F16, Type::Q4_0, Type::Q4_K}},
      {"mul_mat_w_broadcast_12cols",
       nullptr,
       5e-3f,
       [](Graph& g, const Leaf& l, Type t) {
         Tensor* x =
             g.view(l(g, {300, 12, 4, 2}, 35), {256, 12, 4, 2}, {4, 300 * 4, 300 * 4 * 12, 300 * 4 * 12 * 4}, 0);
         return g.mul_mat(l(g, t, {256, 19, 1, 2}, 34), x);
       },
       {Type::F32, Type::F16, Type::Q4_0, Type::Q4_K}},
      {"mul_mat_t_w", nullptr, 1e-4f,
       [](Graph& g, const Leaf& l, Type t) {
         Tensor* w = l(g, t, {256, 48, 2}, 36);
         return g.add(g.mul_mat_t(w, l(g, {48, 3, 2}, 37)), g.mul_mat_t(w, l(g, {48, 1, 2}, 38)));
       },
       weight_types()},
      {"mul_mat_t_w_40cols", nullptr, 1e-4f,
       [](Graph& g, const Leaf& l, Type t) {
         return g.mul_mat_t(l(g, t, {512, 24}, 39), l(g, {24, 40}, 40));
       },
       weight_types()},
      {"mul_mat_id_w", nullptr, 2e-2f,
       [](Graph& g, const Leaf& l, Type t) {
         Tensor* w = l(g, t, {256, 21, 4}, 41);
         Tensor* ids = l.ids(g, {2, 5}, {3, 0, 1, 3, 2, 2, 0, 1, 3, 1});
         // One activation column per token (gate / up) and one per (slot, token) (down).
         return g.add(g.mul_mat_id(w, l(g, {256, 1, 5}, 42), ids), g.mul_mat_id(w, l(g, {256, 2, 5}, 43), ids));
       },
       weight_types()},
      {"get_rows_w", nullptr, 1e-6f,
       [](Graph& g, const Leaf& l, Type t) {
         Tensor* flat = g.get_rows(l(g, t, {256, 10}, 44), l.ids(g, {6}, {9, 0, 4, 4, 7, 1}));
         Tensor* batched =
             g.get_rows(l(g, t, {256, 10, 2}, 45), l.ids(g, {6, 2}, {9, 0, 4, 4, 7, 1, 2, 3, 8, 5, 6, 0}));
         return g.add(batched, flat);
       },
       weight_types()},
      {"norm_matmul_silu_chain",
       [](Graph& g, const Leaf& l) {
         Tensor* n = g.mul(g.rms_norm(l(g, {64, 3}, 17), 1e-5f), l(g, {64}, 18));
         return g.silu(g.mul_mat(l(g, {64, 48}, 19), n));
       },
       1e-5f},
      // ---- rope, top-k, row movers, flash attention ------------------------------------------
      {"rope_yarn_strided",  // DeepSeek's q_pe: the rope part of wider rows, YaRN, normal pairs
       [](Graph& g, const Leaf& l) {
         Tensor* q = l(g, {96, 4, 3}, 40);
         Tensor* pe = g.view(q, {64, 4, 3, 1}, {q->nb[0], q->nb[1], q->nb[2], q->nb[3]}, 32 * sizeof(float));
         const ggl::RopeParams p{
             .n_rot = 64, .freq_scale = 1.0f / 40.0f, .ext_factor = 1.0f, .attn_factor = 1.3689f, .n_ctx_orig = 4096};
         return g.rope(pe, l.ids(g, {3}, {0, 5, 4000}), p);
       },
       1e-5f},
      {"rope_neox_partial_freq_factors",
       [](Graph& g, const Leaf& l) {
         Tensor* factors = g.sigmoid(l(g, {16}, 41));
         return g.rope(l(g, {64, 2, 4}, 42), l.ids(g, {4}, {0, 1, 2, 3}), {.n_rot = 32, .neox = true}, factors);
       },
       1e-5f},
      {"top_k",
       [](Graph& g, const Leaf& l) {
         return g.top_k(l(g, {64, 5}, 43), {.k = 6});
       },
       1e-6f},
      {"top_k_groups",
       [](Graph& g, const Leaf& l) {
         return g.top_k(l(g, {160, 3}, 44), {.k = 6, .n_groups = 8, .n_groups_used = 3});
       },
       1e-6f},
      {"sum_rows",
       [](Graph& g, const Leaf& l) {
         return g.sum_rows(l(g, {100, 7}, 45));
       },
       1e-6f},
      {"concat_rows_of_permuted",  // MLA's absorbed query: [512, T, H] permuted, then the rope part
       [](Graph& g, const Leaf& l) {
         return g.concat(g.permute(l(g, {512, 2, 16}, 46), 0, 2, 1, 3), l(g, {64, 16, 2}, 47), 0);
       },
       1e-6f},
      {"concat_dim1_broadcast",
       [](Graph& g, const Leaf& l) {
         return g.concat(l(g, {8, 3, 2}, 48), l(g, {8, 2, 1}, 49), 1);
       },
       1e-6f},
      {"cont_permuted",
       [](Graph& g, const Leaf& l) {
         return g.cont(g.permute(l(g, {32, 5, 3}, 50), 0, 2, 1, 3));
       },
       1e-6f},
      {"cont_cache_rope_part_q8_0",  // the naive MLA form's k_pe: the last 64 values of each cache row
       [](Graph& g, const Leaf& l) {
         Tensor* c = l(g, Type::Q8_0, {576, 20}, 51);
         return g.cont(
             g.view(c, {64, 1, 20, 1}, {c->nb[0], c->nb[1], c->nb[1], c->nb[1] * 20}, ggl::row_bytes(Type::Q8_0, 512)));
       },
       1e-6f},
      {"cont_cache_f16",
       [](Graph& g, const Leaf& l) {
         return g.cont(l(g, Type::F16, {576, 9}, 52));
       },
       1e-6f},
      {"cont_cache_bf16",
       [](Graph& g, const Leaf& l) {
         return g.cont(l(g, Type::BF16, {128, 9}, 53));
       },
       1e-6f},
      // Writes 3 latents into rows 2..4 of a cache, then reads the whole cache back as f32.
      {"copy_into_cache_f16", [](Graph& g, const Leaf& l) { return copy_into_cache(g, l, Type::F16); }, 1e-6f},
      {"copy_into_cache_bf16", [](Graph& g, const Leaf& l) { return copy_into_cache(g, l, Type::BF16); }, 1e-6f},
      {"copy_into_cache_q8_0", [](Graph& g, const Leaf& l) { return copy_into_cache(g, l, Type::Q8_0); }, 1e-6f},
      {"copy_into_cache_f32", [](Graph& g, const Leaf& l) { return copy_into_cache(g, l, Type::F32); }, 1e-6f},
      // DeepSeek's absorbed MLA decode: 16 heads on one latent cache of 576-value rows, V its first 512.
      {"flash_attn_mla_decode_f16", [](Graph& g, const Leaf& l) { return mla_decode(g, l, Type::F16, 300, {299}); },
       1e-4f},
      {"flash_attn_mla_decode_q8_0_two_tokens",
       [](Graph& g, const Leaf& l) {
         return mla_decode(g, l, Type::Q8_0, 160, {150, 151});
       },
       1e-4f},
      {"flash_attn_mla_decode_bf16_long",
       [](Graph& g, const Leaf& l) { return mla_decode(g, l, Type::BF16, 3000, {2999}); }, 1e-4f},
      {"flash_attn_prefill_gqa_f16",  // 4 heads on 2 KV heads, 7 tokens after 5 cached, Dv not a multiple of 32
       [](Graph& g, const Leaf& l) {
         Tensor* K = l(g, Type::F16, {64, 2, 12}, 54);
         Tensor* V = l(g, Type::F16, {48, 2, 12}, 55);
         return g.flash_attn(g.scale(l(g, {64, 4, 7}, 56), 20.0f), K, V, l.ids(g, {7}, {5, 6, 7, 8, 9, 10, 11}),
                             0.125f);
       },
       1e-4f},
      {"flash_attn_prefill_mha_f32",  // MLA's naive form: per-head K and V in f32 (the CPU may take 16-bit integers)
       [](Graph& g, const Leaf& l) {
         return g.flash_attn(l(g, {96, 3, 10}, 57), l(g, {96, 3, 10}, 58), l(g, {64, 3, 10}, 59),
                             l.ids(g, {10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}), 0.1f);
       },
       2e-3f},
  };
  return all;
}

// Runs a case (with weight type t where it is typed) on a backend: leaves in its memory
// (uploaded), the result read back.
std::vector<float> run_case(const OpCase& c, Type t, Backend& backend) {
  std::vector<std::unique_ptr<ggl::BackendBuffer>> buffers;
  std::vector<std::vector<uint8_t>> host;
  const auto place = [&](Graph& g, Type type, const std::vector<int64_t>& ne) {
    void* data = host.back().data();
    if (backend.memory() == ggl::Memory::kDevice) {
      buffers.push_back(backend.allocate(host.back().size()));
      backend.upload(buffers.back()->base(), data, host.back().size());
      data = buffers.back()->base();
    }
    return g.external(type, ne, data, "leaf");
  };
  Leaf leaf;
  leaf.make = [&](Graph& g, Type type, std::vector<int64_t> ne, uint32_t seed) {
    if (type == Type::F32) {
      const std::vector<float> values = random_floats(count(ne), seed);
      host.emplace_back(reinterpret_cast<const uint8_t*>(values.data()),
                        reinterpret_cast<const uint8_t*>(values.data() + values.size()));
    } else {
      std::mt19937 rng(seed);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      host.push_back(
          latte::testing::quantized_rows(type, static_cast<int64_t>(count(ne)) / ne[0], ne[0], rng, normal).bytes);
    }
    return place(g, type, ne);
  };
  leaf.make_ids = [&](Graph& g, std::vector<int64_t> ne, std::vector<int32_t> values) {
    host.emplace_back(reinterpret_cast<const uint8_t*>(values.data()),
                      reinterpret_cast<const uint8_t*>(values.data() + values.size()));
    return place(g, Type::I32, ne);
  };
  Graph g;
  Tensor* out = c.typed ? c.typed(g, leaf, t) : c.build(g, leaf);
  g.mark_output(out);
  backend.synchronize();
  backend.compute(g);
  std::vector<float> result(static_cast<size_t>(out->n_elements()));
  if (out->type == Type::I32) {
    std::vector<int32_t> ids(result.size());
    backend.read(*out, ids.data(), 0, ids.size() * sizeof(int32_t));
    std::copy(ids.begin(), ids.end(), result.begin());
  } else {
    EXPECT_EQ(out->type, Type::F32) << c.name << ": compare f32 or i32 results";
    backend.read(*out, result.data(), 0, result.size() * sizeof(float));
  }
  return result;
}

TEST(BackendOps, EveryOpAgainstTheCpu) {
  auto backends = ggl::available_backends({.n_threads = 1, .gpus = true});
  backends.pop_back();  // the CPU, the reference
  if (backends.empty()) GTEST_SKIP() << "SKIPPED: no GPU backend (" << ggl::gpu_devices().why_none << ")";
  ggl::CpuBackend cpu(1);
  for (auto& backend : backends)
    for (const OpCase& c : cases())
      for (Type t : c.typed ? c.types : std::vector<Type>{Type::F32}) {
        const std::string what =
            std::string(backend->name()) + " " + c.name + (c.typed ? " " + std::string(ggl::type_name(t)) : "");
        const std::vector<float> want = run_case(c, t, cpu);
        const std::vector<float> got = run_case(c, t, *backend);
        ASSERT_EQ(got.size(), want.size()) << what;
        float scale = 0.0f;
        for (float v : want) scale = std::max(scale, std::fabs(v));
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(got[i], want[i], c.tolerance * std::max(scale, 1.0f)) << what << " at " << i;
      }
}

// Decode steps on a persistent cache: each writes its latent into the cache and attends over the
// rows so far. Steps 2 and 3 repeat a graph kind with new shapes and pointers (captured again and
// patched into the CUDA graph), step 4 repeats step 3 exactly (replayed as captured): each must
// still match the CPU.
TEST(BackendOps, RepeatedDecodeGraphsMatchTheCpu) {
  auto backends = ggl::available_backends({.n_threads = 1, .gpus = true});
  backends.pop_back();
  if (backends.empty()) GTEST_SKIP() << "SKIPPED: no GPU backend (" << ggl::gpu_devices().why_none << ")";
  constexpr int64_t kRow = 576, kHeads = 16, kRows = 64;
  const size_t cache_bytes = ggl::row_bytes(Type::F16, kRow) * kRows;
  ggl::CpuBackend cpu(1);
  for (auto& backend : backends) {
    // Each backend's buffers: the cache, the step's latent, query and position (same addresses every step).
    struct Buffers {
      std::vector<std::unique_ptr<ggl::BackendBuffer>> owned;
      void* at[4];
    };
    const size_t sizes[4] = {cache_bytes, kRow * sizeof(float), kRow * kHeads * sizeof(float), sizeof(int32_t)};
    const auto buffers_of = [&](Backend& b) {
      Buffers bufs;
      for (int i = 0; i < 4; ++i) {
        bufs.owned.push_back(b.allocate(sizes[i]));
        bufs.at[i] = bufs.owned.back()->base();
      }
      std::vector<uint8_t> cache(cache_bytes);
      const std::vector<float> values = random_floats(kRow * kRows, 70);
      for (int64_t r = 0; r < kRows; ++r)
        ggl::quantize_row(Type::F16, values.data() + r * kRow, cache.data() + r * (cache_bytes / kRows), kRow);
      b.upload(bufs.at[0], cache.data(), cache_bytes);
      return bufs;
    };
    Buffers on_cpu = buffers_of(cpu), on_device = buffers_of(*backend);
    const auto step = [&](Backend& b, Buffers& bufs, int32_t pos) {
      const std::vector<float> latent = random_floats(kRow, 71 + pos), q = random_floats(kRow * kHeads, 72 + pos, 0.3f);
      b.upload(bufs.at[1], latent.data(), sizes[1]);
      b.upload(bufs.at[2], q.data(), sizes[2]);
      b.upload(bufs.at[3], &pos, sizes[3]);
      Graph g;
      Tensor* cache = g.external(Type::F16, std::vector<int64_t>{kRow, kRows}, bufs.at[0], "cache");
      const size_t row = cache->nb[1];
      g.copy(g.external(Type::F32, std::vector<int64_t>{kRow, 1}, bufs.at[1], "latent"),
             g.view(cache, {kRow, 1, 1, 1}, {cache->nb[0], row, row, row}, pos * row));
      const int64_t n = pos + 1;
      Tensor* K = g.view(cache, {kRow, 1, n, 1}, {cache->nb[0], row, row, row * n}, 0);
      Tensor* V = g.view(cache, {512, 1, n, 1}, {cache->nb[0], row, row, row * n}, 0);
      Tensor* out = g.flash_attn(g.external(Type::F32, std::vector<int64_t>{kRow, kHeads, 1}, bufs.at[2], "q"), K, V,
                                 g.external(Type::I32, std::vector<int64_t>{1}, bufs.at[3], "pos"), 0.1352f);
      g.mark_output(out);
      b.compute(g);
      std::vector<float> result(static_cast<size_t>(out->n_elements()));
      b.read(*out, result.data(), 0, result.size() * sizeof(float));
      return result;
    };
    for (const int32_t pos : {30, 31, 32, 32, 33}) {
      const std::vector<float> want = step(cpu, on_cpu, pos);
      const std::vector<float> got = step(*backend, on_device, pos);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-4f) << backend->name() << " position " << pos << " at " << i;
    }
  }
}

TEST(BackendOps, UnsupportedOpsAreDeclined) {
  auto backends = ggl::available_backends({.n_threads = 1, .gpus = true});
  backends.pop_back();
  if (backends.empty()) GTEST_SKIP() << "SKIPPED: no GPU backend (" << ggl::gpu_devices().why_none << ")";
  // cont decodes f32, f16, bf16 and q8_0 rows (the cache types) on the GPU; the CPU also decodes
  // weight types such as q4_0, which no graph conts.
  Graph g;
  std::vector<uint8_t> x(ggl::row_bytes(Type::Q4_0, 64) * 2);
  Tensor* cont = g.cont(g.external(Type::Q4_0, std::vector<int64_t>{64, 2}, x.data(), "x"));
  for (auto& backend : backends) {
    EXPECT_FALSE(backend->supports_op(*cont)) << backend->name() << ": cont of q4_0 has no kernel";
    EXPECT_THROW(backend->compute(g), ggl::Error) << backend->name();
  }
}

}  // namespace test_backend_ops
