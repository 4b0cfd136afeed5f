// Pieces shared by the attention kernels that put queries on the lanes of AVX-512 vectors
// (op_attention.cpp in float32, attention_int16.cpp on 16-bit integers). AVX-512 builds only.
#pragma once
#if defined(__AVX512F__)
#include <xsimd/xsimd.hpp>

#include <cmath>
#include <cstdint>

#include "ggml-like/x86_intrinsics.h"

namespace ggl::attention_wide {

using Vec = xsimd::batch<float, xsimd::avx512f>;
inline constexpr int64_t kLanes = 16;

// Pins a vector to a register: without it GCC re-reads each query/probability vector as a memory
// operand of every FMA that uses it (one 64-byte load per FMA, which made the two-vector kernel
// load-bound at ~2/3 of the FMA rate) instead of broadcasting the shared key/value element.
inline void in_register(Vec& v) {
  __m512 r = v;
  asm("" : "+v"(r));
  v = r;
}

// Online-softmax update for a block of nk keys whose scores sit in sc ([nk][W] floats, W = NV * 16
// lanes, masked keys -inf): the scores become exp(score - new max), l[u] adds them, and c[u]
// (returned) is the factor the lanes' earlier sums must be scaled by. A lane whose keys are all
// masked so far keeps max -inf: it adds nothing (its p are exp(-inf) = 0), and 0 stands in for
// its max in the exponents.
template <int NV>
inline void softmax_block(float* sc, int64_t nk, bool masked, Vec* m, Vec* l, Vec* c) {
  constexpr int64_t W = NV * kLanes;
  for (int u = 0; u < NV; ++u) {
    Vec mb = m[u];
    for (int64_t j = 0; j < nk; ++j) mb = xsimd::max(mb, Vec::load_aligned(sc + j * W + u * kLanes));
    const Vec base = masked ? xsimd::select(mb == Vec(-INFINITY), Vec(0.0f), mb) : mb;
    c[u] = xsimd::exp(m[u] - base);  // 0 for the first block
    l[u] *= c[u];
    for (int64_t j = 0; j < nk; ++j) {
      const Vec p = xsimd::exp(Vec::load_aligned(sc + j * W + u * kLanes) - base);
      p.store_aligned(sc + j * W + u * kLanes);
      l[u] += p;
    }
    m[u] = mb;
  }
}

}  // namespace ggl::attention_wide
#endif
