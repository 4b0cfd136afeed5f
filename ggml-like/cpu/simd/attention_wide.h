// Pieces shared by the attention kernels that put queries on the lanes of vectors (op_attention.cpp
// in float32, attention_int16.cpp on 16-bit integers), written once over the vector type: the
// instruction set's header under cpu/arch/ names it, its lane count and its register count
// (AVX-512: 16 lanes, 32 registers; AVX2: 8 lanes, 16 registers; NEON: 4 lanes, 32 registers).
// Where none applies (the generic set), GGL_ATTN_WIDE stays undefined and the kernels take their
// scalar paths.
#pragma once
#include "ggml-like/cpu/arch/x86/avx2/attention_lanes.h"
#include "ggml-like/cpu/arch/x86/avx512/attention_lanes.h"
#include "ggml-like/cpu/arch/arm/neon/attention_lanes.h"
#if defined(GGL_ATTN_LANES)
#define GGL_ATTN_WIDE 1
#include <xsimd/xsimd.hpp>

#include <cmath>
#include <cstdint>

#include "ggml-like/cpu/arch/avx512_undefined.h"

namespace ggl::GGL_ISA::attention_wide {

using attention_lanes::kLanes;
using attention_lanes::kRegisters;
using attention_lanes::Vec;

// Pins a vector to a register: without it GCC re-reads each query/probability vector as a memory
// operand of every FMA that uses it (one vector load per FMA, which made the AVX-512 kernel
// load-bound at ~2/3 of the FMA rate) instead of broadcasting the shared key/value element.
inline void in_register(Vec& v) {
  typename Vec::register_type r = v;
#if defined(__aarch64__)
  asm("" : "+w"(r));  // an FP/SIMD register
#else
  asm("" : "+v"(r));  // an xmm/ymm/zmm register
#endif
  v = r;
}

// The lanes' state at the start of a pass: lane i sees keys below limit[i] (the pass walks keys
// below j_end), the running max starts at -inf and the running sum at 0. masked: whether some lane
// sees fewer keys than the pass walks, so that scores need masking.
template <int NV>
struct PassLanes {
  Vec visible[NV], m[NV], l[NV];
  bool masked = false;

  PassLanes(const float* limit, int64_t j_end) {
    for (int u = 0; u < NV; ++u) {
      visible[u] = Vec::load_aligned(limit + u * kLanes);
      masked = masked || xsimd::any(visible[u] < Vec(static_cast<float>(j_end)));
      m[u] = Vec(-INFINITY);
      l[u] = Vec(0.0f);
    }
  }
  // The score of `key` for the lanes of vector u: -inf where they do not see it.
  Vec mask(Vec score, int64_t key, int u) const {
    return xsimd::select(Vec(static_cast<float>(key)) < visible[u], score, Vec(-INFINITY));
  }
};

// Online-softmax update for a block of nk keys whose scores sit in sc ([nk][W] floats, W = NV *
// kLanes, masked keys -inf): the scores become exp(score - new max), l[u] adds them, and c[u]
// (returned) is the factor the lanes' earlier sums must be scaled by. A lane whose keys are all
// masked so far keeps max -inf: it adds nothing (its p are exp(-inf) = 0), and 0 stands in for
// its max in the exponents.
template <int NV>
inline void softmax_block(float* sc, int64_t nk, bool masked, Vec* m, Vec* l, Vec* c) {
  constexpr int64_t W = NV * kLanes;
  for (int u = 0; u < NV; ++u) {
    Vec mb = m[u];
    GGL_AVX512_UNDEFINED_BEGIN
    for (int64_t j = 0; j < nk; ++j) mb = xsimd::max(mb, Vec::load_aligned(sc + j * W + u * kLanes));
    const Vec base = masked ? xsimd::select(mb == Vec(-INFINITY), Vec(0.0f), mb) : mb;
    c[u] = xsimd::exp(m[u] - base);  // 0 for the first block
    l[u] *= c[u];
    for (int64_t j = 0; j < nk; ++j) {
      const Vec p = xsimd::exp(Vec::load_aligned(sc + j * W + u * kLanes) - base);
      p.store_aligned(sc + j * W + u * kLanes);
      l[u] += p;
    }
    GGL_AVX512_UNDEFINED_END
    m[u] = mb;
  }
}

}  // namespace ggl::GGL_ISA::attention_wide
#endif
