// MHA prefill attention on 16-bit integers (attention_int16.cpp): the flash_attn op of a batch of
// tokens with one query head per KV head (MLA's naive form, Llama MHA) and float32 K and V, where
// AVX-512 VNNI is present and integer paths are enabled (int_gemm.h). Everything else takes the
// float32 kernels of op_attention.cpp.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ggml-like/cpu/cpu_kernels.h"

namespace ggl {

// Whether MHA heads of these sizes take the integer kernel on this machine (build, CPU and the
// integer-path switch of int_gemm.h), and whether a flash_attn node does.
bool mha_int16_takes(int64_t Dk, int64_t Dv);
bool mha_int16_applies(const Tensor& dst);
size_t mha_int16_work(const Tensor& dst, int n_threads);
// Called by every thread of the team, like every kernel.
void mha_int16(const Tensor& dst, const CpuThread& th);

}  // namespace ggl
