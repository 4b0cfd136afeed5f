// Indices of the k largest values of each row, largest first; ties go to the lower index.
// Group-limited mode (mixture-of-experts routing): the row is split into equal groups, each group
// is scored by the sum of its two largest values (its largest value when it has one member), and
// only the members of the best n_groups_used groups compete.
#include <algorithm>
#include <numeric>

#include "ggml-like/core/top_k_rule.h"
#include "ggml-like/cpu/op_thread.h"
#include "ggml-like/graph/graph.h"

#include "ggml-like/cpu/simd/set_declarations.h"

namespace ggl::GGL_ISA {
namespace {

size_t per_thread_bytes(const Tensor& dst) {
  const int64_t n = dst.src[0]->ne[0];
  return 2 * scratch_size(n * sizeof(int32_t)) + scratch_size(n * sizeof(float));
}

}  // namespace

size_t cpu_top_k_work(const Tensor& dst, int n_threads) { return per_thread_bytes(dst) * n_threads; }

void cpu_top_k(const Tensor& dst, const CpuThread& th) {
  const Tensor& a = *dst.src[0];
  const TopKParams p = top_k_params(dst);
  const int64_t n = a.ne[0], group = n / p.n_groups;
  const size_t per = per_thread_bytes(dst);
  auto* idx = reinterpret_cast<int32_t*>(th.work + th.ith * per);
  auto* group_score = reinterpret_cast<float*>(th.work + th.ith * per + scratch_size(n * sizeof(int32_t)));
  auto* groups = reinterpret_cast<int32_t*>(th.work + th.ith * per + scratch_size(n * sizeof(int32_t)) +
                                            scratch_size(n * sizeof(float)));

  auto [r0, r1] = split_range(a.n_rows(), th.ith, th.nth);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t i1 = r % a.ne[1], i2 = (r / a.ne[1]) % a.ne[2], i3 = r / (a.ne[1] * a.ne[2]);
    const float* v = a.f32_row(i1, i2, i3);
    auto before = [v](int32_t x, int32_t y) { return topk_before(v[x], x, v[y], y); };

    int64_t candidates = n;
    std::iota(idx, idx + n, 0);
    if (p.n_groups > 1) {
      for (int g = 0; g < p.n_groups; ++g) group_score[g] = topk_group_score(v + g * group, group);
      // Rank the groups, then keep the members of the best ones (in index order).
      std::iota(groups, groups + p.n_groups, 0);
      std::stable_sort(groups, groups + p.n_groups,
                       [group_score](int32_t x, int32_t y) { return group_score[x] > group_score[y]; });
      std::sort(groups, groups + p.n_groups_used);
      candidates = 0;
      for (int g = 0; g < p.n_groups_used; ++g)
        for (int64_t j = 0; j < group; ++j) idx[candidates++] = static_cast<int32_t>(groups[g] * group + j);
    }
    std::partial_sort(idx, idx + p.k, idx + candidates, before);
    int32_t* out = reinterpret_cast<int32_t*>(dst.row(i1, i2, i3));
    std::copy(idx, idx + p.k, out);
  }
}

}  // namespace ggl::GGL_ISA
