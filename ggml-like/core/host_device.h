// Marks functions that both the CUDA kernels and the host compile: __host__ __device__ under nvcc,
// plain inline C++ otherwise, so that the CPU ops and the kernels share arithmetic (core/'s
// half_bits.h, rope_math.h, top_k_rule.h) and the default build can test on the host the code the
// kernels run (cuda/'s block_decode.h, cuda_math.h, mla_decode_block.h, ...).
#pragma once

#if defined(__CUDACC__)
#define GGL_HD __host__ __device__ __forceinline__
#else
#define GGL_HD inline
#endif
#if defined(__CUDA_ARCH__)  // the device pass (the host compiler would warn of an unknown pragma)
#define GGL_UNROLL _Pragma("unroll")
#else
#define GGL_UNROLL
#endif
