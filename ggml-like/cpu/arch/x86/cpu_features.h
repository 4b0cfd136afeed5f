// What this x86 CPU and its operating system let a process execute, read from CPUID and XCR0
// (the register state the OS saves on a context switch), for the choice of kernel set. Written
// against the instruction set manuals' bit positions rather than __builtin_cpu_supports, whose
// feature names differ between compilers (clang 14 knows neither "bmi2" nor "avxvnni").
#pragma once
#include <cpuid.h>

#include <cstdint>

namespace ggl::x86 {

struct CpuFeatures {
  bool avx2 = false;  // with FMA, F16C and BMI2, as the avx2 kernel set is compiled
  bool avx_vnni = false;
  bool avx512 = false;  // F, BW, VL, DQ and VNNI, as the avx512 kernel set is compiled
};

inline CpuFeatures cpu_features() {
  CpuFeatures f;
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool fma = ecx & (1u << 12), osxsave = ecx & (1u << 27), avx = ecx & (1u << 28), f16c = ecx & (1u << 29);
  if (!(osxsave && avx)) return f;
  uint32_t xcr0_low, xcr0_high;
  __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  const bool os_ymm = (xcr0_low & 0x6) == 0x6;    // SSE and AVX state
  const bool os_zmm = (xcr0_low & 0xe6) == 0xe6;  // and the opmask and upper ZMM state
  if (!os_ymm || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  const bool avx2 = ebx & (1u << 5), bmi2 = ebx & (1u << 8);
  const bool avx512f = ebx & (1u << 16), avx512dq = ebx & (1u << 17), avx512bw = ebx & (1u << 30),
             avx512vl = ebx & (1u << 31), avx512vnni = ecx & (1u << 11);
  f.avx2 = avx2 && fma && f16c && bmi2;
  f.avx512 = f.avx2 && os_zmm && avx512f && avx512dq && avx512bw && avx512vl && avx512vnni;
  unsigned leaf7_1_eax = 0;
  if (__get_cpuid_count(7, 1, &leaf7_1_eax, &ebx, &ecx, &edx)) f.avx_vnni = f.avx2 && (leaf7_1_eax & (1u << 4));
  return f;
}

}  // namespace ggl::x86
