// Attention on 16-bit integers (simd/attention_int16.cpp), where the kernel set has it and integer
// paths are enabled (int_gemm.h): the flash_attn op of a batch of tokens with one query head per KV
// head and float32 K and V (MHA prefill: MLA's naive form, Llama MHA), and of queries with 16 or
// more heads per KV head and a cache type K and V (MLA's absorbed decode and prefill, large GQA
// groups). Everything else takes the float32 kernels of simd/op_attention.cpp.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ggml-like/cpu/op_thread.h"

namespace ggl {

// Whether MHA heads of these sizes take the integer kernel with the kernel set in use (kernel_set.h:
// its instruction set, and the integer-path switch of int_gemm.h), and whether a flash_attn node
// does. (The kernel itself runs inside the flash_attn op.)
bool mha_int16_takes(int64_t Dk, int64_t Dv);
bool attention_int16_applies(const Tensor& dst);

}  // namespace ggl
