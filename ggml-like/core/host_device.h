// GGL_HD marks inline functions that both the CPU code and the CUDA kernels compile: __host__
// __device__ under nvcc, nothing for the ordinary C++ compiler (no CUDA header needed).
#pragma once

#if defined(__CUDACC__)
#define GGL_HD __host__ __device__
#else
#define GGL_HD
#endif
