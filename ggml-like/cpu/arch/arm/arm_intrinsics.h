// The ARM intrinsics the SIMD kernels use, where the build targets them: Advanced SIMD (NEON),
// which every AArch64 (ARMv8-A) core has, and the dot product instructions (ARMv8.2-A +dotprod)
// where the compiler targets them.
#pragma once
#if defined(__ARM_NEON)
#include <arm_neon.h>
#endif
