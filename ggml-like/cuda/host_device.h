// Marks functions that both the CUDA kernels and the host compile: __host__ __device__ under nvcc,
// plain inline C++ otherwise, so the default build can test on the host the code the kernels run.
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
