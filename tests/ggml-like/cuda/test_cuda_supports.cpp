// What the CUDA backend says it runs, asked without a device: supports() and the work buffer the
// matrix products need are plain host code, so a CUDA build checks them on any machine. The
// kernels themselves are tested by test_backend_ops (on a GPU), test_cuda_block_decode and
// test_cuda_host_math (their host/device code, on the host).
#include <gtest/gtest.h>

#include <vector>

#include "ggml-like/graph/graph.h"
#include "ggml-like/quant/quant.h"
#include "tests/support/random_floats.h"
#if LATTE_CUDA
#include "ggml-like/cuda/cuda_ops.h"
#include "ggml-like/cuda/matmul_kernels.h"
#endif

namespace test_cuda_supports {

using ggl::Graph;
using ggl::Tensor;
using ggl::Type;

#if LATTE_CUDA
// A leaf with no bytes: supports() and the work sizes look at types and shapes only.
Tensor* leaf(Graph& g, Type t, std::vector<int64_t> ne) { return g.external(t, ne, nullptr, "leaf"); }
#endif

TEST(CudaSupports, ProductsAndGathersOfEveryWeightType) {
#if !LATTE_CUDA
  GTEST_SKIP() << "SKIPPED: built without the CUDA backend (-DLATTE_CUDA=ON)";
#else
  for (Type t : latte::testing::weight_types()) {
    Graph g;
    Tensor* w = leaf(g, t, {512, 37, 4});
    for (int64_t m : {1, 8, 40})
      EXPECT_TRUE(ggl::cuda::supports(*g.mul_mat(w, leaf(g, Type::F32, {512, m, 4})))) << ggl::type_name(t) << " " << m;
    EXPECT_TRUE(ggl::cuda::supports(*g.mul_mat_t(leaf(g, t, {512, 24}), leaf(g, Type::F32, {24, 3}))))
        << ggl::type_name(t);
    Tensor* ids = leaf(g, Type::I32, {2, 5});
    EXPECT_TRUE(ggl::cuda::supports(*g.mul_mat_id(w, leaf(g, Type::F32, {512, 1, 5}), ids))) << ggl::type_name(t);
    EXPECT_TRUE(ggl::cuda::supports(*g.get_rows(w, leaf(g, Type::I32, {6, 4})))) << ggl::type_name(t);
  }
#endif
}

TEST(CudaSupports, DeclinesWhatHasNoKernel) {
#if !LATTE_CUDA
  GTEST_SKIP() << "SKIPPED: built without the CUDA backend (-DLATTE_CUDA=ON)";
#else
  Graph g;
  // The kernels decode float rows in groups of 8 values.
  Tensor* odd = leaf(g, Type::F16, {12, 5});
  EXPECT_FALSE(ggl::cuda::supports(*g.mul_mat(odd, leaf(g, Type::F32, {12, 2}))));
  EXPECT_FALSE(ggl::cuda::supports(*g.get_rows(odd, leaf(g, Type::I32, {3}))));
  // cuBLAS reads x's columns at their stride: overlapping columns only on the mat-vec path.
  Tensor* x = leaf(g, Type::F32, {600});
  Tensor* overlapping = g.view(x, {256, 40, 1, 1}, {4, 8, 8 * 40, 8 * 40}, 0);
  EXPECT_FALSE(ggl::cuda::supports(*g.mul_mat(leaf(g, Type::Q4_0, {256, 7}), overlapping)));
  Tensor* few = g.view(x, {256, 8, 1, 1}, {4, 8, 8 * 8, 8 * 8}, 0);
  EXPECT_TRUE(ggl::cuda::supports(*g.mul_mat(leaf(g, Type::Q4_0, {256, 7}), few)));
#endif
}

TEST(CudaSupports, WorkBufferOfTheProducts) {
#if !LATTE_CUDA
  GTEST_SKIP() << "SKIPPED: built without the CUDA backend (-DLATTE_CUDA=ON)";
#else
  Graph g;
  Tensor* w = leaf(g, Type::Q4_0, {512, 37});
  // Mat-vec reads the blocks: no scratch. More columns: the dequantized rows, here all 37.
  EXPECT_EQ(ggl::cuda::matmul_work_bytes(*g.mul_mat(w, leaf(g, Type::F32, {512, 8}))), 0u);
  EXPECT_EQ(ggl::cuda::matmul_work_bytes(*g.mul_mat(w, leaf(g, Type::F32, {512, 9}))), 37u * 512 * sizeof(float));
  // f32 weights go to cuBLAS in place.
  Tensor* f32 = leaf(g, Type::F32, {512, 37});
  EXPECT_EQ(ggl::cuda::matmul_work_bytes(*g.mul_mat(f32, leaf(g, Type::F32, {512, 40}))), 0u);
  // A large matrix is dequantized in chunks of whole rows of at most 64 MiB.
  Tensor* head = leaf(g, Type::Q4_K, {4096, 102400});
  const size_t big = ggl::cuda::matmul_work_bytes(*g.mul_mat(head, leaf(g, Type::F32, {4096, 40})));
  EXPECT_LE(big, size_t{64} << 20);
  EXPECT_EQ(big % (4096 * sizeof(float)), 0u);
  // mul_mat_t dequantizes its rows (of N values) the same way.
  EXPECT_EQ(ggl::cuda::matmul_work_bytes(*g.mul_mat_t(leaf(g, Type::Q8_0, {256, 48}), leaf(g, Type::F32, {48, 1}))),
            48u * 256 * sizeof(float));
  // mul_mat_id: the pairs sorted by expert and their tiles.
  Tensor* ids = leaf(g, Type::I32, {6, 100});
  Tensor* experts = leaf(g, Type::Q4_0, {256, 21, 64});
  EXPECT_EQ(ggl::cuda::matmul_work_bytes(*g.mul_mat_id(experts, leaf(g, Type::F32, {256, 1, 100}), ids)),
            ggl::cuda::mat_vec_id_work_bytes(600, 64));
#endif
}

// Rope, top-k, the row movers and flash attention in the layouts of DeepSeek's MLA graphs, for
// every cache type (strided q_pe, the absorbed query's concat, cache views, copies into the cache,
// decode and prefill attention), and what has no kernel.
TEST(CudaGraphOpsSupports, MlaGraphShapesOfEveryCacheType) {
#if !LATTE_CUDA
  GTEST_SKIP() << "SKIPPED: built without the CUDA backend (-DLATTE_CUDA=ON)";
#else
  Graph g;
  Tensor* pos = leaf(g, Type::I32, {2});
  Tensor* q3 = leaf(g, Type::F32, {192, 16, 2});
  Tensor* pe = g.view(q3, {64, 16, 2, 1}, {q3->nb[0], q3->nb[1], q3->nb[2], q3->nb[3]}, 128 * sizeof(float));
  EXPECT_TRUE(ggl::cuda::supports(
      *g.rope(pe, pos, {.n_rot = 64, .freq_scale = 0.025f, .ext_factor = 1.0f, .n_ctx_orig = 4096})));
  EXPECT_TRUE(ggl::cuda::supports(
      *g.rope(leaf(g, Type::F32, {128, 8, 2}), pos, {.n_rot = 128, .neox = true}, leaf(g, Type::F32, {64}))));
  EXPECT_TRUE(ggl::cuda::supports(*g.top_k(leaf(g, Type::F32, {160, 2}), {.k = 6, .n_groups = 8, .n_groups_used = 3})));
  EXPECT_TRUE(ggl::cuda::supports(*g.sum_rows(leaf(g, Type::F32, {6, 2}))));
  Tensor* q = g.concat(g.permute(leaf(g, Type::F32, {512, 2, 16}), 0, 2, 1, 3), leaf(g, Type::F32, {64, 16, 2}), 0);
  EXPECT_TRUE(ggl::cuda::supports(*q));
  for (Type t : {Type::F32, Type::F16, Type::BF16, Type::Q8_0}) {
    const int64_t n = 300;
    Tensor* cache = leaf(g, t, {576, n});
    const size_t row = cache->nb[1];
    Tensor* K = g.view(cache, {576, 1, n, 1}, {cache->nb[0], row, row, row * n}, 0);
    Tensor* V = g.view(cache, {512, 1, n, 1}, {cache->nb[0], row, row, row * n}, 0);
    EXPECT_TRUE(ggl::cuda::supports(*g.flash_attn(q, K, V, pos, 0.135f))) << ggl::type_name(t);
    EXPECT_TRUE(ggl::cuda::supports(
        *g.cont(g.view(cache, {64, 1, n, 1}, {cache->nb[0], row, row, row * n}, ggl::row_bytes(t, 512)))))
        << ggl::type_name(t);
    EXPECT_TRUE(ggl::cuda::supports(*g.copy(
        leaf(g, Type::F32, {512, 2}), g.view(cache, {512, 2, 1, 1}, {cache->nb[0], row, row * 2, row * 2}, 7 * row))))
        << ggl::type_name(t);
    // GQA prefill on separate K and V caches of this type.
    EXPECT_TRUE(ggl::cuda::supports(*g.flash_attn(leaf(g, Type::F32, {128, 8, 5}), leaf(g, t, {128, 2, 9}),
                                                  leaf(g, t, {128, 2, 9}), leaf(g, Type::I32, {5}), 0.088f)))
        << ggl::type_name(t);
  }
#endif
}

TEST(CudaGraphOpsSupports, DeclinesWhatHasNoKernel) {
#if !LATTE_CUDA
  GTEST_SKIP() << "SKIPPED: built without the CUDA backend (-DLATTE_CUDA=ON)";
#else
  Graph g;
  EXPECT_FALSE(ggl::cuda::supports(*g.cont(leaf(g, Type::Q4_0, {64, 2}))));  // cont decodes the cache types only
  EXPECT_FALSE(ggl::cuda::supports(*g.copy(leaf(g, Type::F32, {256, 2}), leaf(g, Type::Q4_K, {256, 2}))));
  EXPECT_FALSE(ggl::cuda::supports(*g.top_k(leaf(g, Type::F32, {8200, 1}), {.k = 2})));  // past one warp's shared flags
  Tensor* wide = leaf(g, Type::F32, {2048, 1, 1});
  EXPECT_FALSE(ggl::cuda::supports(*g.flash_attn(wide, leaf(g, Type::F16, {2048, 1, 4}), leaf(g, Type::F16, {64, 1, 4}),
                                                 leaf(g, Type::I32, {1}), 1.0f)));  // rows longer than a warp's 1024
  // f32 rows whose stride is not a whole float cannot be read by float loads.
  Tensor* bytes = leaf(g, Type::F32, {64, 4});
  Tensor* odd = g.view(bytes, {8, 3, 1, 1}, {4, 34, 102, 102}, 0);
  EXPECT_FALSE(ggl::cuda::supports(*g.cont(odd)));
#endif
}

}  // namespace test_cuda_supports
