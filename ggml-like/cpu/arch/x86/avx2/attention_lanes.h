// The vector the wide attention kernels (cpu/simd/attention_wide.h) put queries on where the
// compiler targets AVX2 with FMA but not AVX-512: 8 float lanes, 16 vector registers.
#pragma once
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
#define GGL_ATTN_LANES 1
#include <xsimd/xsimd.hpp>

#include <cstdint>

#include "ggml-like/cpu/arch/x86/x86_intrinsics.h"

namespace ggl::GGL_ISA::attention_lanes {

// fma3<avx2>, not avx2: xsimd's plain avx2 batch has no fused multiply-add.
using Vec = xsimd::batch<float, xsimd::fma3<xsimd::avx2>>;
inline constexpr int64_t kLanes = 8;
inline constexpr int kRegisters = 16;

}  // namespace ggl::GGL_ISA::attention_lanes
#endif
