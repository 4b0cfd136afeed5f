// The vector the wide attention kernels (cpu/simd/attention_wide.h) put queries on where the
// compiler targets AVX-512: 16 float lanes, 32 vector registers.
#pragma once
#if defined(__AVX512F__)
#define GGL_ATTN_LANES 1
#include <xsimd/xsimd.hpp>

#include <cstdint>

#include "ggml-like/cpu/arch/x86/x86_intrinsics.h"

namespace ggl::GGL_ISA::attention_lanes {

using Vec = xsimd::batch<float, xsimd::avx512f>;
inline constexpr int64_t kLanes = 16;
inline constexpr int kRegisters = 32;

}  // namespace ggl::GGL_ISA::attention_lanes
#endif
