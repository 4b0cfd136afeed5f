// The vector the wide attention kernels (cpu/simd/attention_wide.h) put queries on for both ARM
// sets (aarch64 Advanced SIMD): 4 float lanes, 32 vector registers. A pass of 16 heads (decode)
// spans four vectors, one of 32 tokens (MHA prefill) eight. There are no 16-bit integer attention
// steps here: NEON's widening multiplies do 8 products in three instructions (SMULL, SMULL2,
// ADDP), no more per instruction than FMLA does in float32.
#pragma once
#if defined(__ARM_NEON) && defined(__aarch64__)
#define GGL_ATTN_LANES 1
#include <xsimd/xsimd.hpp>

#include <cstdint>

namespace ggl::GGL_ISA::attention_lanes {

using Vec = xsimd::batch<float, xsimd::neon64>;
inline constexpr int64_t kLanes = 4;
inline constexpr int kRegisters = 32;

}  // namespace ggl::GGL_ISA::attention_lanes
#endif
