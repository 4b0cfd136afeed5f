// This instruction set's table of kernels (kernel_set.h), read by cpu/dispatch.cpp.
#include "ggml-like/cpu/simd/set_declarations.h"

#define GGL_STRINGIFY2(x) #x
#define GGL_STRINGIFY(x) GGL_STRINGIFY2(x)

namespace ggl::GGL_ISA {

const CpuKernels kKernels{
    GGL_STRINGIFY(GGL_ISA),
    dot_row,
    matmul,
    decode_row,
    node_work_bytes,
    run_node,
    mha_int16_takes,
    attention_int16_applies,
    kMhaInt16Speedup,
    grouped_int16_takes,
    kGroupedInt16Speedup,
    &kInt16Gemm,
    &kInt8Gemm,
    &kInt8KGemm,
    &kInt8B32Gemm,
};

}  // namespace ggl::GGL_ISA
