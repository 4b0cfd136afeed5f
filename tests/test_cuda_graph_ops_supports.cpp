// What the CUDA backend says it runs of rope, top-k, the row movers and flash attention, asked
// without a device (supports() is plain host code): the shapes and layouts of DeepSeek's MLA
// graphs (strided rope input, the absorbed query's concat, cache views of every cache type,
// copies into the cache, decode and prefill attention), and what has no kernel. The kernels
// themselves: test_cuda_host_math (their arithmetic, on the host) and test_backend_ops (a GPU).
#include <gtest/gtest.h>

#include <vector>

#include "ggml-like/graph/graph.h"
#include "ggml-like/quant/quant.h"
#if LATTE_CUDA
#include "ggml-like/cuda/cuda_ops.h"
#endif

namespace {

using ggl::Graph;
using ggl::Tensor;
using ggl::Type;

#if LATTE_CUDA
// A leaf with no bytes: supports() looks at types, shapes and strides only.
Tensor* leaf(Graph& g, Type t, std::vector<int64_t> ne) { return g.external(t, ne, nullptr, "leaf"); }
bool supported(const Tensor* node) { return ggl::cuda::supports(*node); }
#endif

TEST(CudaGraphOpsSupports, MlaGraphShapesOfEveryCacheType) {
#if !LATTE_CUDA
  GTEST_SKIP() << "SKIPPED: built without the CUDA backend (-DLATTE_CUDA=ON)";
#else
  Graph g;
  Tensor* pos = leaf(g, Type::I32, {2});
  Tensor* q3 = leaf(g, Type::F32, {192, 16, 2});
  Tensor* pe = g.view(q3, {64, 16, 2, 1}, {q3->nb[0], q3->nb[1], q3->nb[2], q3->nb[3]}, 128 * sizeof(float));
  EXPECT_TRUE(supported(g.rope(pe, pos, {.n_rot = 64, .freq_scale = 0.025f, .ext_factor = 1.0f, .n_ctx_orig = 4096})));
  EXPECT_TRUE(supported(g.rope(leaf(g, Type::F32, {128, 8, 2}), pos, {.n_rot = 128, .neox = true},
                               leaf(g, Type::F32, {64}))));
  EXPECT_TRUE(supported(g.top_k(leaf(g, Type::F32, {160, 2}), {.k = 6, .n_groups = 8, .n_groups_used = 3})));
  EXPECT_TRUE(supported(g.sum_rows(leaf(g, Type::F32, {6, 2}))));
  Tensor* q = g.concat(g.permute(leaf(g, Type::F32, {512, 2, 16}), 0, 2, 1, 3), leaf(g, Type::F32, {64, 16, 2}), 0);
  EXPECT_TRUE(supported(q));
  for (Type t : {Type::F32, Type::F16, Type::BF16, Type::Q8_0}) {
    const int64_t n = 300;
    Tensor* cache = leaf(g, t, {576, n});
    const size_t row = cache->nb[1];
    Tensor* K = g.view(cache, {576, 1, n, 1}, {cache->nb[0], row, row, row * n}, 0);
    Tensor* V = g.view(cache, {512, 1, n, 1}, {cache->nb[0], row, row, row * n}, 0);
    EXPECT_TRUE(supported(g.flash_attn(q, K, V, pos, 0.135f))) << ggl::type_name(t);
    EXPECT_TRUE(supported(g.cont(g.view(cache, {64, 1, n, 1}, {cache->nb[0], row, row, row * n},
                                        ggl::row_bytes(t, 512)))))
        << ggl::type_name(t);
    EXPECT_TRUE(supported(g.copy(leaf(g, Type::F32, {512, 2}),
                                 g.view(cache, {512, 2, 1, 1}, {cache->nb[0], row, row * 2, row * 2}, 7 * row))))
        << ggl::type_name(t);
    // GQA prefill on separate K and V caches of this type.
    EXPECT_TRUE(supported(g.flash_attn(leaf(g, Type::F32, {128, 8, 5}), leaf(g, t, {128, 2, 9}), leaf(g, t, {128, 2, 9}),
                                       leaf(g, Type::I32, {5}), 0.088f)))
        << ggl::type_name(t);
  }
#endif
}

TEST(CudaGraphOpsSupports, DeclinesWhatHasNoKernel) {
#if !LATTE_CUDA
  GTEST_SKIP() << "SKIPPED: built without the CUDA backend (-DLATTE_CUDA=ON)";
#else
  Graph g;
  EXPECT_FALSE(supported(g.cont(leaf(g, Type::Q4_0, {64, 2}))));  // cont decodes the cache types only
  EXPECT_FALSE(supported(g.copy(leaf(g, Type::F32, {256, 2}), leaf(g, Type::Q4_K, {256, 2}))));
  EXPECT_FALSE(supported(g.top_k(leaf(g, Type::F32, {8200, 1}), {.k = 2})));  // past one warp's shared flags
  Tensor* wide = leaf(g, Type::F32, {2048, 1, 1});
  EXPECT_FALSE(supported(g.flash_attn(wide, leaf(g, Type::F16, {2048, 1, 4}), leaf(g, Type::F16, {64, 1, 4}),
                                      leaf(g, Type::I32, {1}), 1.0f)));  // rows longer than a warp's 1024
  // f32 rows whose stride is not a whole float cannot be read by float loads.
  Tensor* bytes = leaf(g, Type::F32, {64, 4});
  Tensor* odd = g.view(bytes, {8, 3, 1, 1}, {4, 34, 102, 102}, 0);
  EXPECT_FALSE(supported(g.cont(odd)));
#endif
}

}  // namespace
